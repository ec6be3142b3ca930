"""Admission control: a queue in front of the model bounded by time, not by count.

Every admitted feature (one model window) is charged the model time it is expected to cost; the charges of work
not yet done form the backlog. A request whose own charge, added to the backlog, would end after its deadline
(arrival + SAGEMAKER_MODEL_SERVER_TIMEOUT) cannot be answered in time: it is refused at once (503 with a short
reason: the client may retry later) instead of waiting out the timeout for a 504 while the model spends its time on
answers nobody reads. So the queue holds at most one timeout's worth of model time.

The cost comes from measurement: the seconds per feature of every model call, per sequence bucket, warm-up calls
included, as an exponentially weighted moving average, plus a margin of a few mean deviations of those calls
(`EwmaCost`), as TCP prices its retransmission timeout. Under overload the backlog stays full to the deadline, so a
price at the mean alone makes every admitted request whose model calls run slower than average miss its deadline.
Pure logic, no clock of its own: callers pass `now` and deadlines, and tests pass a fixed estimate.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

# Weight of the newest observation: a step change in the model's speed (a noisy neighbour, a thermal limit) shows
# within ~10 calls, and one slow call moves the estimate by a fifth of its excess.
EWMA_ALPHA = 0.2
# A feature is charged its mean time plus SPREAD mean deviations, the deviation smoothed with weight 1/4 and started
# at half the first sample (RFC 6298, section 2: RTO = SRTT + K * RTTVAR, beta = 1/4, RTTVAR = R/2 at first).
# Measured with scripts/bench_faults.py (4x overload for 10 s, timeout 2 s, the tiny model, a 2-core VM shared with
# other jobs): priced at the mean, 40-96 of ~150-300 admitted requests per run ended in 504; SPREAD 2: 0 and 8;
# SPREAD 3 and 4: none in two runs each, SPREAD 3 answering more. The margin decides only whether a request fits
# behind the queue: whether it is too large for the timeout at all (413) is judged on its expected time, and an idle
# server takes any request whose expected time fits (a margin must not refuse it for good: nothing else would run to
# wear the margin away).
SPREAD = 3.0
DEVIATION_BETA = 0.25


class CostEstimate(Protocol):
    def seconds(self, bucket: int) -> float:
        """Model time charged for one feature padded to `bucket` tokens: its expected time with a margin for
        jitter (0.0 when nothing is known yet)."""
        ...

    def expected(self, bucket: int) -> float:
        """The expected model time of one such feature, without the margin (0.0 when nothing is known yet)."""
        ...

    def observe(self, bucket: int, batch: int, seconds: float) -> None:
        """One model call of `batch` features of `bucket` tokens took `seconds` (called on the inference thread)."""
        ...

    def snapshot(self) -> dict[int, float]:
        """The current mean time per observed bucket (for /stats)."""
        ...


class EwmaCost:
    """Seconds per feature per bucket, as a moving average over model calls of any batch size, and the price of a
    feature: that average plus `spread` smoothed mean deviations.

    A bucket never observed is priced from the nearest observed one, scaled by its padded tokens.
    """

    def __init__(self, alpha: float = EWMA_ALPHA, spread: float = SPREAD, beta: float = DEVIATION_BETA) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError("alpha must be in (0, 1]")
        if not 0.0 < beta <= 1.0:
            raise ValueError("beta must be in (0, 1]")
        if spread < 0.0:
            raise ValueError("spread must be >= 0")
        self._alpha = alpha
        self._beta = beta
        self._spread = spread
        self._per_feature: dict[int, float] = {}
        self._deviation: dict[int, float] = {}
        self._lock = threading.Lock()

    def observe(self, bucket: int, batch: int, seconds: float) -> None:
        if batch < 1 or seconds < 0.0:
            return
        sample = seconds / batch
        with self._lock:
            old = self._per_feature.get(bucket)
            if old is None:
                self._per_feature[bucket] = sample
                self._deviation[bucket] = sample / 2.0
                return
            deviation = self._deviation[bucket]
            self._deviation[bucket] = deviation + self._beta * (abs(sample - old) - deviation)
            self._per_feature[bucket] = old + self._alpha * (sample - old)

    def seconds(self, bucket: int) -> float:
        return self._priced(bucket, self._spread)

    def expected(self, bucket: int) -> float:
        return self._priced(bucket, 0.0)

    def _priced(self, bucket: int, spread: float) -> float:
        with self._lock:
            if not self._per_feature:
                return 0.0
            nearest = bucket
            if bucket not in self._per_feature:
                nearest = min(self._per_feature, key=lambda b: (abs(b - bucket), b))
            price = self._per_feature[nearest] + spread * self._deviation[nearest]
            return price * bucket / nearest

    def snapshot(self) -> dict[int, float]:
        with self._lock:
            return dict(sorted(self._per_feature.items()))


class Refused(Exception):
    """Admission said no; the message is short and safe to show a client."""


class Overloaded(Refused):
    """The work already queued leaves too little time before this request's deadline (retry later).

    `retry_after_s`: whole seconds until the backlog ahead of it, admitting nothing more, would leave this request
    room before a fresh deadline (at least 1): what the 503 says in `Retry-After` (RFC 9110, section 10.2.3:
    delay-seconds, a non-negative integer)."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def retry_after(backlog_s: float, need_s: float, timeout_s: float) -> int:
    """Whole seconds until `backlog_s` of queued model time has drained enough for a request needing `need_s` to
    finish within a fresh `timeout_s`; at least 1, at most the timeout (the backlog never holds more)."""
    wait = backlog_s + need_s - timeout_s
    return max(1, min(math.ceil(max(timeout_s, 1.0)), math.ceil(wait)))


class TooLarge(Refused):
    """The request alone needs more model time than the whole timeout (retrying cannot help)."""


@dataclass(eq=False)
class Charge:
    """The expected model time of one admitted feature, held in the backlog until it runs or is dropped."""

    seconds: float
    released: bool = False


class Admission:
    """The backlog and the two checks: `precheck` on a request's length before it is tokenized, `admit` on its
    windows' expected cost after. Thread-safe: the inference thread releases charges as model calls return."""

    def __init__(self, timeout_s: float, enabled: bool = True, alpha: float = EWMA_ALPHA, share: float = 1.0) -> None:
        """`share`: the part of each request's timeout that queued model work may fill; the rest is left for what
        the price does not see (reading and answering it on a busy event loop, the tail of the model's times)."""
        if not 0.0 < share <= 1.0:
            raise ValueError("share must be in (0, 1]")
        self.timeout_s = timeout_s
        self._reserve_s = (1.0 - share) * timeout_s
        self.enabled = enabled
        self._alpha = alpha
        self._backlog = 0.0
        self._seconds_per_char: float | None = None
        self._seconds_per_byte: float | None = None
        self._lock = threading.Lock()
        self.admitted = 0
        self.refused_busy = 0
        self.refused_too_large = 0
        self.refused_before_tokenizing = 0
        self.refused_before_reading = 0
        self._slowdown = 1.0

    def _overloaded(self, need: float) -> Overloaded:
        """The refusal of a request needing `need` seconds behind the current backlog (under lock)."""
        return Overloaded(
            f"server is at capacity: ~{self._backlog:.1f}s of queued model time would not leave this "
            f"request's ~{need:.1f}s within its {self.timeout_s:g}s timeout; retry later",
            retry_after(self._backlog, need, self.timeout_s - self._reserve_s),
        )

    def _idle(self) -> bool:
        """Nothing queued (up to rounding), under lock. An idle server never refuses a request that fits the timeout
        at its expected cost: whatever the margins and the slowdown say, nothing else would run to correct them
        (CI once saw a server refuse every request after an overload had raised its slowdown)."""
        return self._backlog < 1e-9

    def _ahead(self, need: float) -> float:
        """Seconds until a request needing `need` would be answered, behind the backlog, at the speed the model has
        been delivering (under lock)."""
        return (self._backlog + need) * self._slowdown

    @property
    def slowdown(self) -> float:
        """How much longer admitted work has been taking than its price said (>= 1: a price never shrinks)."""
        with self._lock:
            return self._slowdown

    def completed(self, priced_s: float, took_s: float) -> None:
        """An admitted request waited `took_s` for model work priced at `priced_s` (the backlog ahead of it plus its
        own). Its ratio, smoothed, scales every price: the per-call estimate measures the model's calls, not what
        else shares the CPU between them (the HTTP side under a storm, other processes, the GIL), and a queue priced
        at the calls alone lets admitted requests run past their deadlines."""
        if priced_s <= 0.0 or took_s <= 0.0:
            return
        with self._lock:
            ratio = max(1.0, took_s / priced_s)
            self._slowdown = max(1.0, self._slowdown + self._alpha * (ratio - self._slowdown))

    @property
    def backlog_s(self) -> float:
        with self._lock:
            return max(0.0, self._backlog)

    def precheck(self, chars: int, now: float, deadline: float) -> None:
        """Overloaded when a request of `chars` characters, priced at the model seconds per character of the
        requests admitted so far, cannot fit: under heavy overload most arrivals are refused, and tokenizing each
        one first (~5 ms for four paragraphs) would leave the event loop no time for anything else. A request the
        estimate finds bigger than the whole timeout is left to `admit`, which knows (413, not a 503 to retry)."""
        if not self.enabled:
            return
        with self._lock:
            if self._seconds_per_char is None:
                return
            need = chars * self._seconds_per_char
            if need <= self.timeout_s and not self._idle() and now + self._ahead(need) > deadline - self._reserve_s:
                self.refused_busy += 1
                self.refused_before_tokenizing += 1
                raise self._overloaded(need)

    def refuse_unread(self, body_bytes: int, now: float) -> Overloaded | None:
        """The refusal for a request of `body_bytes` (its Content-Length) that arrives `now`, priced at the model
        seconds per body byte of the requests admitted so far, when it cannot fit; None when it may (or nothing is
        known yet). The HTTP layer answers it before reading the body or building a request (container/app.py):
        under a retry storm refusals are most of the traffic, and each costs the CPU the model needs."""
        if not self.enabled:
            return None
        with self._lock:
            if self._seconds_per_byte is None:
                return None
            need = body_bytes * self._seconds_per_byte
            if need > self.timeout_s or self._idle() or self._ahead(need) <= self.timeout_s - self._reserve_s:
                return None
            self.refused_busy += 1
            self.refused_before_reading += 1
            return self._overloaded(need)

    def learn(self, chars: int, seconds: float, body_bytes: int = 0) -> None:
        """An admitted request of `chars` characters (`body_bytes` on the wire) was charged `seconds`: update the
        per-character and per-byte prices."""
        with self._lock:
            if chars >= 1:
                sample = seconds / chars
                old = self._seconds_per_char
                self._seconds_per_char = sample if old is None else old + self._alpha * (sample - old)
            if body_bytes >= 1:
                sample = seconds / body_bytes
                old = self._seconds_per_byte
                self._seconds_per_byte = sample if old is None else old + self._alpha * (sample - old)

    def admit(self, costs: Sequence[float], now: float, deadline: float, expected: float | None = None) -> list[Charge]:
        """Charges for `costs` (one per feature, margins included), or Overloaded/TooLarge when they cannot finish by
        `deadline`. `expected` is the request's model time without margins (default: the sum of `costs`): TooLarge
        when it exceeds the timeout, and enough to be admitted by an idle server."""
        need = sum(costs)
        base = need if expected is None else expected
        with self._lock:
            if self.enabled:
                if base > self.timeout_s:
                    self.refused_too_large += 1
                    raise TooLarge(
                        f"this request needs ~{base:.1f}s of model time, more than the {self.timeout_s:g}s timeout "
                        "(shorten the context or split the request)"
                    )
                idle_fit = self._idle() and now + base <= deadline
                if now + self._ahead(need) > deadline - self._reserve_s and not idle_fit:
                    self.refused_busy += 1
                    raise self._overloaded(need)
            self._backlog += need
            self.admitted += 1
        return [Charge(cost) for cost in costs]

    def release(self, charges: Iterable[Charge]) -> None:
        """Take charges out of the backlog (their work ran, or was dropped); releasing twice is harmless."""
        with self._lock:
            for charge in charges:
                if not charge.released:
                    charge.released = True
                    self._backlog -= charge.seconds
