"""Scenario 3, kill -9 of an endpoint's serving process: an endpoint in an embedded AWS (process mode) under an
open-loop load through boto3's sagemaker-runtime client (botocore retries off, so every error is seen); SIGKILL its
serving process while a request is out (the benchmark waits for one). Every response must be an answer or a
retryable error (ServiceUnavailable, ModelError with the container's 503, throttling); recovery time is from the
kill to the first answer to a request sent after it.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagebox.bench.faults.box import BoxUrls, Invoker, restarts, serving_pids
from sagebox.bench.faults.load import OpenLoop
from sagebox.bench.faults.outcomes import ANSWER, Call, counts, error_codes, in_flight_at, recovery_s
from sagebox.bench.faults.waits import poll


@dataclass
class KillRun:
    """Every request of a kill run, when the kill came, and what fleet.json said of the instance before and after."""

    killed_pid: int
    replacement_pids: list[int]
    restarts_before: int
    restarts_after: int
    calls: list[Call]
    killed_at: float
    recovery_s: float | None
    rate_qps: float

    def summary(self) -> dict[str, Any]:
        """The kill scenario's figures in the results JSON."""
        after = [c for c in self.calls if c.due >= self.killed_at]
        return {
            "rate_qps": self.rate_qps,
            "requests": len(self.calls),
            "outcomes": counts(self.calls),
            "error_codes": error_codes(self.calls),
            "recovery_s": self.recovery_s,
            "in_flight_at_kill": len(in_flight_at(self.calls, self.killed_at)),
            "failed_after_kill": sum(1 for c in after if c.outcome != ANSWER),
            "restarts": self.restarts_after - self.restarts_before,
            "replacement_pid_differs": self.killed_pid not in self.replacement_pids,
        }


def run_kill(
    box: BoxUrls,
    endpoint: str,
    body: bytes,
    rate_qps: float = 20.0,
    warm_answers: int = 20,
    tail_answers: int = 20,
    clock: Callable[[], float] = time.perf_counter,
) -> KillRun:
    """SIGKILL the endpoint's serving process under an open-loop load; wait (bounded) for answers again."""
    from sagebox.errors import SageboxError

    [pid] = serving_pids(box.state_dir, endpoint)
    restarts_before = restarts(box.state_dir, endpoint)
    load = OpenLoop(Invoker(box, endpoint, body), rate_qps, workers=16, clock=clock)
    load.start()
    killed_at = math.inf
    try:
        # Kill while a request is out, so that one meets the dying process (or the gateway's dead route).
        warm = load.wait_for(
            lambda calls: sum(c.outcome == ANSWER for c in calls) >= warm_answers and load.in_flight > 0
        )
        if not warm:
            raise SageboxError(f"endpoint {endpoint} gave no {warm_answers} answers before the kill")
        killed_at = clock()
        os.kill(pid, signal.SIGKILL)
        recovered = load.wait_for(lambda calls: recovery_s(calls, killed_at) is not None)
        if recovered:
            load.wait_for(lambda calls: sum(c.outcome == ANSWER and c.due >= killed_at for c in calls) >= tail_answers)
    finally:
        calls = load.stop()
    # The control plane routes to a replacement as soon as it starts and records the restart in fleet.json once the
    # replacement is healthy: wait for that record.
    poll(lambda: restarts(box.state_dir, endpoint) > restarts_before and serving_pids(box.state_dir, endpoint) != [pid])
    replacement = serving_pids(box.state_dir, endpoint)
    return KillRun(
        pid, replacement, restarts_before, restarts(box.state_dir, endpoint), calls, killed_at,
        recovery_s(calls, killed_at), rate_qps,
    )  # fmt: skip
