from __future__ import annotations

import itertools

import pytest

from sagebox.bench.latency import interleaved_latency, percentile, rotation, summarize


def test_rotation_changes_who_goes_first() -> None:
    names = ["a", "b", "c"]
    assert [rotation(names, r)[0] for r in range(4)] == ["a", "b", "c", "a"]
    assert sorted(rotation(names, 2)) == names


def test_interleaved_latency_times_each_call_with_the_clock() -> None:
    calls: list[str] = []
    ticks = itertools.count()
    clock = lambda: next(ticks) / 1000.0  # noqa: E731 - every clock read advances 1 ms
    runners = {name: (lambda n=name: calls.append(n)) for name in ("x", "y")}
    times = interleaved_latency(runners, rounds=3, warmup=1, clock=clock)
    assert calls == ["x", "y", "x", "y", "y", "x", "x", "y"]  # warm-up, then rotated rounds
    assert times == {"x": pytest.approx([1.0] * 3), "y": pytest.approx([1.0] * 3)}


def test_summaries() -> None:
    ms = [10.0, 20.0, 30.0, 40.0, 1000.0]
    s = summarize(ms)
    assert s["p50_ms"] == 30.0
    assert s["min_ms"] == 10.0
    assert s["n"] == 5
    assert 40.0 < s["p90_ms"] < 1000.0
    assert percentile([5.0], 90) == 5.0
    with pytest.raises(ValueError):
        percentile([], 50)
