"""Percentiles against numpy, and the load generator's bookkeeping."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from sagebox.bench.loadgen import LoadPlan, run_load
from sagebox.bench.stats import percentile, summarize_ms


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 1000])
def test_percentile_matches_numpy(n: int) -> None:
    rng = random.Random(n)
    values = [rng.expovariate(1.0) for _ in range(n)]
    for q in (0, 1, 50, 90, 99, 99.9, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_percentile_errors() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_in_milliseconds() -> None:
    s = summarize_ms([0.001, 0.002, 0.003, 0.004])
    assert s["p50_ms"] == pytest.approx(2.5)
    assert s["min_ms"] == pytest.approx(1.0) and s["max_ms"] == pytest.approx(4.0)
    assert s["n"] == 4


def test_closed_loop_sends_each_query_once_with_bounded_concurrency() -> None:
    seen: list[int] = []
    active = 0
    peak = 0
    lock = threading.Lock()

    def send(i: int) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
            if i >= 0:
                seen.append(i)
        threading.Event().wait(0.002)
        with lock:
            active -= 1

    result = run_load(send, LoadPlan(queries=50, concurrency=4, warmup=3))
    assert sorted(seen) == list(range(50))
    assert len(result.latencies_s) == 50 and result.issued == 50
    assert 1 < peak <= 4
    assert result.qps > 0


def test_errors_are_counted_not_raised() -> None:
    def send(i: int) -> None:
        if i % 5 == 0:
            raise RuntimeError("boom")

    result = run_load(send, LoadPlan(queries=20, concurrency=2))
    assert len(result.errors) == 4 and len(result.latencies_s) == 16


def test_fixed_rate_spaces_arrivals_with_the_injected_clock() -> None:
    """Open loop: arrival i is scheduled at i/rate on the injected clock, and the generator waits only for that."""
    now = [0.0]
    slept: list[float] = []
    sent: list[int] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    result = run_load(
        sent.append, LoadPlan(queries=10, concurrency=1, rate_qps=100.0), clock=lambda: now[0], sleep=sleep
    )
    assert result.issued == 10 and sorted(sent) == list(range(10))
    assert slept == pytest.approx([0.01] * 9)  # no wait before the first arrival, 1/rate before each next
    assert now[0] == pytest.approx(0.09)


def test_duration_bound_stops_the_run() -> None:
    ticks = iter(range(1000))

    def clock() -> float:
        return float(next(ticks))  # one "second" per reading

    result = run_load(lambda i: None, LoadPlan(queries=100, concurrency=1, max_seconds=10), clock=clock)
    assert result.issued < 100
