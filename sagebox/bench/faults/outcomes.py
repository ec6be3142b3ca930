"""What one request of a fault scenario got, and the tallies every scenario's summary is made of (pure).

A response is one of three outcomes: an answer, an error the client may retry (the fault was seen and said so), or
anything else, which a fault must never produce. The serving process's own responses and InvokeEndpoint's are
classified apart because they say "retry later" differently (a JSON 503 against an error code).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sagebox.bench.stats import summarize_ms

ANSWER = "answer"
RETRYABLE = "retryable"  # the client may retry: ServiceUnavailable, throttling, the container's own 503
OTHER = "other"  # anything else: a fault must never produce one
# Error codes of InvokeEndpoint that ask the client to retry later (the runtime API's ServiceUnavailable and the
# throttling codes botocore's standard retry mode treats as transient).
RETRYABLE_CODES = frozenset({"ServiceUnavailable", "ThrottlingException", "Throttling", "TooManyRequestsException"})
DEADLINE = "DeadlineExceeded"  # the server's own 504: its SAGEMAKER_MODEL_SERVER_TIMEOUT passed, the work was cut


@dataclass(frozen=True)
class Reply:
    """What one request got: the HTTP status (0: no response at all), an error code, a short detail."""

    outcome: str
    status: int
    code: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Call:
    """One request as its client saw it: `due` is when it was sent (open loop: its scheduled arrival)."""

    due: float
    done: float
    reply: Reply

    @property
    def latency_s(self) -> float:
        return self.done - self.due

    @property
    def outcome(self) -> str:
        return self.reply.outcome


def is_answer(body: bytes) -> bool:
    """A QA answer as the container renders it: a JSON object with an "answer" (or a list of them)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    items = parsed if isinstance(parsed, list) else [parsed]
    return bool(items) and all(isinstance(item, dict) and "answer" in item for item in items)


def error_message(body: bytes) -> str:
    """The container's JSON error reason ({"error", "status", "message"}), or "" when the body is not one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    message = parsed.get("message") if isinstance(parsed, dict) else None
    return message.strip() if isinstance(message, str) else ""


def classify_server(status: int, body: bytes) -> Reply:
    """A serving process's own response: 200 with an answer; 503 with a JSON reason is a clean refusal; 504 with a
    JSON reason is the server cutting an admitted request at its deadline (not retryable, and not a clean outcome)."""
    if status == 200 and is_answer(body):
        return Reply(ANSWER, status)
    message = error_message(body)
    if status == 503 and message:
        return Reply(RETRYABLE, status, "ServiceUnavailable", message[:200])
    if status == 504 and message:
        return Reply(OTHER, status, DEADLINE, message[:200])
    return Reply(OTHER, status, "", (message or body.decode("utf-8", errors="replace"))[:200])


def classify_invoke(status: int, code: str, original_status: int | None, detail: str = "") -> Reply:
    """An InvokeEndpoint response (status 0: no HTTP response, `code` then names the client's exception)."""
    if status == 200 and not code:
        return Reply(ANSWER, status)
    retryable = code in RETRYABLE_CODES or (code == "ModelError" and original_status == 503)
    shown = f"{code} ({original_status})" if code == "ModelError" else code
    return Reply(RETRYABLE if retryable else OTHER, status, shown, detail[:200])


def counts(calls: Iterable[Call]) -> dict[str, int]:
    """How many of each outcome; all three keys always present, so a zero reads as "none" in the results."""
    tally = {ANSWER: 0, RETRYABLE: 0, OTHER: 0}
    for call in calls:
        tally[call.outcome] = tally.get(call.outcome, 0) + 1
    return tally


def error_codes(calls: Iterable[Call]) -> dict[str, int]:
    """How many of each error code (answers left out), most frequent first."""
    tally: dict[str, int] = {}
    for call in calls:
        if call.outcome != ANSWER:
            key = call.reply.code or f"HTTP {call.reply.status}"
            tally[key] = tally.get(key, 0) + 1
    return dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))


def latency_summary(calls: Sequence[Call]) -> dict[str, float] | None:
    """The clients' latencies (sagebox.bench.stats.summarize_ms); None for no calls, which has no percentiles."""
    return summarize_ms([c.latency_s for c in calls]) if calls else None


def recovery_s(calls: Iterable[Call], fault_at: float) -> float | None:
    """From the fault to the first answer to a request sent at or after it; None if none came."""
    answered = [c.done for c in calls if c.outcome == ANSWER and c.due >= fault_at]
    return min(answered) - fault_at if answered else None


def in_flight_at(calls: Iterable[Call], t: float) -> list[Call]:
    """Requests sent before `t` and not yet complete at `t` (as their clients saw them)."""
    return [c for c in calls if c.due < t < c.done]
