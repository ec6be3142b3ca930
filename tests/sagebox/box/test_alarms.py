"""The alarm evaluator on hand-made datapoints and an injected time: periods, M of N, comparisons, statistics
(percentiles from raw values), missing data, time scale and ingestion delay."""

from __future__ import annotations

import pytest

from sagebox.box.alarms import ALARM, INSUFFICIENT_DATA, OK, AlarmRule, Point, evaluate, percentile, statistic

ERRORS = AlarmRule("ep-5xx", "Sum", 60, 1, 1, 1.0, "GreaterThanOrEqualToThreshold", "notBreaching")
LATENCY = AlarmRule("ep-p90", "p90", 60, 3, 3, 600_000.0, "GreaterThanThreshold", "notBreaching")


def counts(t: float, errors: int, requests: int = 10) -> Point:
    return Point(t, float(requests), float(errors), 0.0, 1.0 if errors else 0.0)


def test_percentiles_are_nearest_rank_over_raw_values() -> None:
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 90) == 9.0 and percentile(values, 50) == 5.0 and percentile(values, 100) == 10.0
    assert percentile([7.0], 99.9) == 7.0
    points = [Point.of(0.0, values[:5]), Point.of(1.0, values[5:])]
    assert statistic(points, "p90") == 9.0
    assert statistic(points, "Average") == 5.5 and statistic(points, "SampleCount") == 10.0
    assert statistic([Point(0.0, 3, 30.0, 5.0, 15.0)], "p90") is None  # a statistic set holds no percentile
    with pytest.raises(ValueError, match="not evaluated by the box"):
        statistic(points, "tm99")


def test_one_error_in_the_last_complete_minute_alarms() -> None:
    now = 600.0 + 5.0  # five seconds into the period starting at 600
    quiet = evaluate(ERRORS, [counts(545.0, 0)], now)
    assert quiet.state == OK and quiet.period_starts == (540.0,)
    failing = evaluate(ERRORS, [counts(545.0, 2), counts(590.0, 1)], now)
    assert failing.state == ALARM and failing.datapoints == (3.0,)
    assert "1 out of the last 1 datapoints [3]" in failing.reason and "greater than or equal to" in failing.reason
    # The period still running (600-660) is not evaluated: its errors count once it is complete.
    assert evaluate(ERRORS, [counts(601.0, 5)], now).state == OK
    assert evaluate(ERRORS, [counts(601.0, 5)], 661.0).state == ALARM


def test_latency_alarms_only_after_three_slow_minutes_and_missing_data_is_not_breaching() -> None:
    slow = [Point.of(t, [700_000.0] * 9 + [1000.0]) for t in (0.0, 60.0, 120.0)]
    assert evaluate(LATENCY, slow[:2], 180.0).state == OK  # two of three minutes: the third is missing, not bad
    assert evaluate(LATENCY, slow, 180.0).state == ALARM
    fast_last = [*slow[:2], Point.of(120.0, [1000.0] * 10)]
    assert evaluate(LATENCY, fast_last, 180.0).state == OK
    missing = AlarmRule("m", "Sum", 60, 2, 2, 1.0, "GreaterThanThreshold", "missing")
    assert evaluate(missing, [], 180.0).state == INSUFFICIENT_DATA
    ignore = AlarmRule("i", "Sum", 60, 2, 2, 1.0, "GreaterThanThreshold", "ignore")
    assert evaluate(ignore, [], 180.0, current=ALARM).state == ALARM
    breaching = AlarmRule("b", "Sum", 60, 2, 2, 1.0, "GreaterThanThreshold", "breaching")
    assert evaluate(breaching, [], 180.0).state == ALARM


def test_m_of_n_counts_breaching_periods() -> None:
    rule = AlarmRule("m-of-n", "Maximum", 60, 5, 2, 10.0, "GreaterThanThreshold", "notBreaching")
    points = [Point.of(0.0, [11.0]), Point.of(60.0, [1.0]), Point.of(120.0, [1.0]), Point.of(180.0, [12.0])]
    assert evaluate(rule, points, 300.0).state == ALARM
    assert evaluate(rule, points[:3], 300.0).state == OK
    below = AlarmRule("low", "Average", 60, 1, 1, 5.0, "LessThanThreshold", "notBreaching")
    assert evaluate(below, [Point.of(240.0, [1.0, 2.0])], 300.0).state == ALARM


def test_a_time_scale_shortens_periods_and_a_delay_waits_for_late_data() -> None:
    # Scale 0.05: a 60 s period lasts 3 real seconds.
    evaluation = evaluate(ERRORS, [counts(7.5, 1)], 9.1, scale=0.05)
    assert evaluation.period_starts == (6.0,) and evaluation.state == ALARM
    # With a 1 s ingestion delay, the period 6-9 is complete only at 10 s.
    delayed = evaluate(ERRORS, [counts(7.5, 1)], 9.1, scale=0.05, delay_s=1.0)
    assert delayed.period_starts == (3.0,) and delayed.state == OK
    assert evaluate(ERRORS, [counts(7.5, 1)], 10.0, scale=0.05, delay_s=1.0).state == ALARM
