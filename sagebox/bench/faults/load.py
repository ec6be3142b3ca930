"""The load the fault scenarios put on a server: the request they send, a client of a serving process, and the two
drivers (closed loop: one request after another; open loop: a fixed arrival rate), each recording every request as
a Call on an injected clock.

Latency counts from when a request was due, not when a thread got round to it: under overload the client's own
queueing is part of what a user would see, and hiding it would flatter the server.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sagebox.bench.faults.outcomes import OTHER, Call, Reply, classify_server
from sagebox.bench.faults.waits import HANG_GUARD_S

Send = Callable[[], Reply]


def request_body(repeats: int = 8) -> bytes:
    """One question on the rainforest paragraph repeated `repeats` times (8: ~2,000 tokens, 7 model windows).

    The overload and SIGTERM scenarios send the long one so that with the tiny default model the server, not the
    Python client sharing its 2 cores, is the bottleneck: on a one-paragraph request the tiny model's call (~1 ms)
    costs less than tokenizing it, and the client's HTTP work is of the same order. The box scenarios send one
    paragraph (`repeats=1`), keeping their load well under one serving process's capacity.
    """
    from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS

    context = " ".join([RAINFOREST_CONTEXT] * max(1, repeats))
    return json.dumps({"question": RAINFOREST_QUESTIONS[0], "context": context}).encode()


class ServerClient:
    """POST /invocations to a serving process, one keep-alive connection per thread; never raises."""

    def __init__(self, port: int, body: bytes, timeout_s: float = 120.0) -> None:
        self.port = port
        self.body = body
        self.timeout_s = timeout_s
        self._local = threading.local()

    def post(self) -> tuple[int, bytes]:
        """(status, body); (0, the error) when no response came (the connection is dropped then)."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
            self._local.conn = conn
        try:
            conn.request("POST", "/invocations", self.body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            self._local.conn = None
            return 0, f"{type(exc).__name__}: {exc}".encode()

    def __call__(self) -> Reply:
        status, body = self.post()
        if status == 0:
            return Reply(OTHER, 0, "ConnectionError", body.decode(errors="replace")[:200])
        return classify_server(status, body)


def closed_loop(send: Send, count: int, clock: Callable[[], float] = time.perf_counter) -> list[Call]:
    """`count` requests, one after another."""
    calls = []
    for _ in range(count):
        sent = clock()
        reply = send()
        calls.append(Call(sent, clock(), reply))
    return calls


class OpenLoop:
    """Requests at a fixed arrival rate from a pool of threads, each recorded as a Call from its scheduled arrival
    (so a request that waits for a free thread shows that wait). Runs until `stop()` or `seconds` have passed.

    `wait(seconds)` waits until the next arrival (default: on the stop event, so `stop()` ends it at once); tests
    pass one that advances their clock instead.
    """

    def __init__(
        self,
        send: Send,
        rate_qps: float,
        workers: int,
        clock: Callable[[], float] = time.perf_counter,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        if rate_qps <= 0:
            raise ValueError("rate_qps must be positive")
        self._send = send
        self._interval = 1.0 / rate_qps
        self._workers = max(1, workers)
        self._clock = clock
        self._calls: list[Call] = []
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None
        self.issued = 0
        self.in_flight = 0  # sent, not yet complete

    def _one(self, due: float) -> None:
        with self._changed:
            self.in_flight += 1
            self._changed.notify_all()
        reply = self._send()
        call = Call(due, self._clock(), reply)
        with self._changed:
            self.in_flight -= 1
            self._calls.append(call)
            self._changed.notify_all()

    def _schedule(self, seconds: float | None) -> None:
        started = self._clock()
        with ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="open-loop") as pool:
            index = 0
            while not self._stop.is_set():
                due = started + index * self._interval
                if seconds is not None and due >= started + seconds:
                    break
                delay = due - self._clock()
                if delay > 0:
                    self._wait(delay)
                    if self._stop.is_set():
                        break
                pool.submit(self._one, due)
                self.issued += 1
                index += 1
        # the pool has waited for every request sent

    def start(self, seconds: float | None = None) -> OpenLoop:
        """Start sending on a thread of its own (for `seconds`, or until `stop()`); returns at once."""
        self._thread = threading.Thread(target=self._schedule, args=(seconds,), name="open-loop", daemon=True)
        self._thread.start()
        return self

    def wait_for(self, predicate: Callable[[list[Call]], bool], timeout_s: float = HANG_GUARD_S) -> bool:
        """Block until `predicate(calls so far)` holds (checked whenever a request starts or ends; it may read
        `in_flight`); False after `timeout_s`."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._calls), timeout_s)

    def join(self) -> list[Call]:
        """Wait for the schedule to end (its duration, or `stop()`) and every request sent to finish."""
        if self._thread is not None:
            self._thread.join()
        with self._changed:
            return sorted(self._calls, key=lambda c: c.due)

    def stop(self) -> list[Call]:
        """Send nothing more; every request already sent still completes and is returned, by arrival."""
        self._stop.set()
        return self.join()

    def run(self, seconds: float) -> list[Call]:
        """Send for `seconds`, then return every request, by arrival, once all are complete."""
        return self.start(seconds).join()
