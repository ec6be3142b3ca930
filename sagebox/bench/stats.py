"""Latency statistics: percentiles (numpy's default linear interpolation) and summaries."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between closest ranks, as numpy.percentile does."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} is outside [0, 100]")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def summarize_ms(latencies_s: Sequence[float]) -> dict[str, float]:
    """P50/P90/P99/mean/min/max in milliseconds, and the count."""
    ms = [v * 1000.0 for v in latencies_s]
    return {
        "n": float(len(ms)),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "mean_ms": sum(ms) / len(ms),
        "min_ms": min(ms),
        "max_ms": max(ms),
    }
