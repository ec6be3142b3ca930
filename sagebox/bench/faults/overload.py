"""Scenario 1, overload: one serving process (`python -m container serve`, SAGEMAKER_MODEL_SERVER_TIMEOUT short) is
first measured at its capacity (closed loop, one client: QPS, P50/P99), then driven at 4x that QPS for 20 s (open
loop: latency counts from each request's scheduled arrival, so client-side queueing is not hidden).

Reported: admitted and refused (503) shares, refused-response and admitted latency, admitted requests the server
cut at their deadline (504), the server's RSS before, at peak and after (a server that queued the excess instead of
refusing it would grow by the bodies and features it holds), and the latency of a closed loop right after the
overload against the one before (recovery).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagebox.bench.faults.load import OpenLoop, ServerClient, closed_loop, request_body
from sagebox.bench.faults.outcomes import ANSWER, DEADLINE, RETRYABLE, Call, error_codes, latency_summary
from sagebox.bench.faults.procfs import RssSampler, rss_kib
from sagebox.bench.faults.storm import affinity, cpu_split

if TYPE_CHECKING:
    from sagebox.local_server import LocalServer


@dataclass(frozen=True)
class OverloadPlan:
    """What an overload run does: the server's timeout, how far over capacity and for how long, how many requests
    measure capacity, warm-up and recovery, and how long each request is (rainforest paragraphs)."""

    timeout_s: int = 2  # SAGEMAKER_MODEL_SERVER_TIMEOUT of the server under test
    factor: float = 4.0  # arrival rate over the measured one-client capacity
    seconds: float = 20.0
    capacity_requests: int = 60
    recovery_requests: int = 30
    warmup_requests: int = 10
    context_repeats: int = 8
    pinned: bool = False  # the server on one CPU, the load generator on the others (sagebox.bench.faults.storm)


def summarize_overload(
    before: Sequence[Call], overload: Sequence[Call], after: Sequence[Call], timeout_s: float
) -> dict[str, Any]:
    """Shares and latencies of an overload run: `before`/`after` closed loops, `overload` the open loop.

    Admitted requests are those the server took on: answered, or cut at their deadline (504); refused ones got 503.
    Latencies are the clients': from each request's scheduled arrival, so client queueing and connecting count too.
    """
    answered = [c for c in overload if c.outcome == ANSWER]
    timed_out = [c for c in overload if c.reply.code == DEADLINE]
    refused = [c for c in overload if c.outcome == RETRYABLE]
    admitted = answered + timed_out
    total = len(overload)
    before_s, after_s = latency_summary(before), latency_summary(after)
    return {
        "requests": total,
        "admitted": len(admitted),
        "answered": len(answered),
        "timed_out_504": len(timed_out),
        "refused_503": len(refused),
        "other": total - len(admitted) - len(refused),
        "admitted_share": len(admitted) / total if total else 0.0,
        "refused_share": len(refused) / total if total else 0.0,
        "admitted_latency": latency_summary(admitted),
        "refused_latency": latency_summary(refused),
        "admitted_over_timeout_client_side": sum(1 for c in admitted if c.latency_s > timeout_s),
        "error_codes": error_codes(overload),
        "before": before_s,
        "after": after_s,
        "after_over_before_p50": after_s["p50_ms"] / before_s["p50_ms"] if before_s and after_s else None,
    }


@dataclass
class OverloadRun:
    """Every request of an overload run, by phase, with the server's memory and its own admission counters."""

    plan: OverloadPlan
    capacity_qps: float
    rate_qps: float
    warmup: list[Call]
    before: list[Call]
    overload: list[Call]
    after: list[Call]
    rss_before_kib: int
    rss_peak_kib: int
    rss_after_kib: int
    server_stats: dict[str, Any]
    workers: int
    layout: dict[str, list[int]] | str = "shared"

    def summary(self) -> dict[str, Any]:
        """The overload scenario's figures in the results JSON."""
        admission = self.server_stats.get("admission", {})
        return {
            "timeout_s": self.plan.timeout_s,
            "seconds": self.plan.seconds,
            "capacity_qps_one_client": self.capacity_qps,
            "offered_qps": self.rate_qps,
            "client_threads": self.workers,
            "layout": self.layout,
            **summarize_overload(self.before, self.overload, self.after, self.plan.timeout_s),
            "rss_before_mib": self.rss_before_kib / 1024,
            "rss_peak_mib": self.rss_peak_kib / 1024,
            "rss_after_mib": self.rss_after_kib / 1024,
            "rss_after_over_before": self.rss_after_kib / self.rss_before_kib,
            "server_admission": {
                k: admission.get(k)
                for k in ("admitted", "refused_busy", "refused_before_tokenizing", "timed_out", "abandoned")
            },
        }


def client_threads(rate_qps: float, timeout_s: float) -> int:
    """Enough threads that no arrival waits for one: every admitted request may be in flight for a whole timeout,
    a refused one for much less (one extra second of arrivals covers those)."""
    return min(1024, max(8, math.ceil(rate_qps * (timeout_s + 1.0))))


def run_overload(
    model_dir: Path,
    log_dir: Path,
    plan: OverloadPlan = OverloadPlan(),
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> OverloadRun:
    """Warm-up, capacity at one client, the open-loop overload at `plan.factor` times it (RSS sampled meanwhile),
    then a closed loop again; the server is stopped on return."""
    from container import env as names
    from sagebox.local_server import LocalServer

    server_env = {names.MODEL_SERVER_TIMEOUT: str(plan.timeout_s), **(env or {})}
    split = cpu_split(os.sched_getaffinity(0), plan.pinned)
    if split is not None:
        server_env.setdefault(names.INTRA_OP_THREADS, str(len(split[0])))
    body = request_body(plan.context_repeats)
    with affinity(split[0] if split else None):  # the pinned layout: the server on its CPU, the clients on the rest
        spawned = LocalServer.spawn(model_dir, log_dir / "overload-server.log", env=server_env)
    try:
        run = _drive(spawned, plan, body, clock, split[1] if split else None)
    finally:
        spawned.stop()
    run.layout = {"server_cpus": sorted(split[0]), "client_cpus": sorted(split[1])} if split else "shared"
    return run


def _drive(
    server: LocalServer, plan: OverloadPlan, body: bytes, clock: Callable[[], float], client_cpus: set[int] | None
) -> OverloadRun:
    from sagebox.errors import SageboxError

    with affinity(client_cpus):
        server.wait_ready()
        pid = server.process.pid
        send = ServerClient(server.port, body)
        warmup = closed_loop(send, plan.warmup_requests, clock)  # also teaches admission control the model's cost
        before = closed_loop(send, plan.capacity_requests, clock)
        refused = [c.reply for c in before if c.outcome != ANSWER]
        if refused:
            raise SageboxError(
                f"{len(refused)} of {len(before)} requests at one client were not answered (first: HTTP "
                f"{refused[0].status} {refused[0].detail}); shorten the request (--context-repeats) or raise --timeout"
            )
        wall = before[-1].done - before[0].due
        capacity = len(before) / wall if wall > 0 else 0.0
        rss_before = rss_kib(pid)
        rate = capacity * plan.factor
        workers = client_threads(rate, plan.timeout_s)
        with RssSampler(pid) as sampler:
            overload = OpenLoop(ServerClient(server.port, body), rate, workers, clock).run(plan.seconds)
        after = closed_loop(send, plan.recovery_requests, clock)
        rss_after = rss_kib(pid)
        stats = server.stats()
    peak = max(sampler.peak_kib, rss_after)
    return OverloadRun(
        plan, capacity, rate, warmup, before, overload, after, rss_before, peak, rss_after, stats, workers
    )  # fmt: skip
