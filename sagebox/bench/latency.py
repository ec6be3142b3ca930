"""Latency that stays fair on a noisy shared machine: variants interleaved, order rotated every round."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        raise ValueError("no samples")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def summarize(ms: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "min_ms": round(min(ms), 2),
        "mean_ms": round(float(np.mean(ms)), 2),
        "n": len(ms),
    }


def rotation(names: Sequence[str], round_index: int) -> list[str]:
    """Round r starts at variant r mod n, so no variant always runs first (or right after a slow one)."""
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def interleaved_latency(
    runners: Mapping[str, Callable[[], object]],
    rounds: int,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Milliseconds per call: one call per variant per round, in rotated order."""
    if rounds < 1:
        raise ValueError("rounds must be >= 1")
    names = list(runners)
    for name in names:
        for _ in range(warmup):
            runners[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in rotation(names, r):
            started = clock()
            runners[name]()
            times[name].append((clock() - started) * 1000.0)
    return times
