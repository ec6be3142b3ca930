"""CloudWatch metric alarms, evaluated as CloudWatch evaluates them (pure logic: datapoints and time passed in).

moto stores alarms but never evaluates them; the box's control plane does, with this. After AWS's "Using Amazon
CloudWatch alarms" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html):
periods are aligned to multiples of `Period`; the alarm looks at the last `EvaluationPeriods` complete periods
and goes to ALARM when `DatapointsToAlarm` of them breach the threshold; `TreatMissingData` decides what a
period without data counts as (missing: not counted, and all missing is INSUFFICIENT_DATA; notBreaching: good;
breaching: bad; ignore: the state stays). Percentile statistics (p90, p99.9) are computed from the raw values
(nearest rank); a period holding only pre-aggregated statistic sets has no percentile.

Periods are box time (`scale` real seconds per box second); timestamps and `now` are real seconds (epoch).
"""

from __future__ import annotations

import datetime
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (operator.gt, "greater than"),
    "GreaterThanOrEqualToThreshold": (operator.ge, "greater than or equal to"),
    "LessThanThreshold": (operator.lt, "less than"),
    "LessThanOrEqualToThreshold": (operator.le, "less than or equal to"),
}
SIMPLE_STATISTICS = ("Sum", "Average", "Minimum", "Maximum", "SampleCount")
PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?|100)$")


@dataclass(frozen=True)
class Point:
    """What one PutMetricData datum holds: a count of samples with their sum, minimum and maximum, and the raw
    values when it was published as Values (percentiles need them)."""

    timestamp: float
    count: float
    total: float
    low: float
    high: float
    values: Sequence[float] = ()

    @classmethod
    def of(cls, timestamp: float, values: Sequence[float]) -> Point:
        return cls(timestamp, float(len(values)), float(sum(values)), min(values), max(values), tuple(values))


@dataclass(frozen=True)
class AlarmRule:
    name: str
    statistic: str  # Sum | Average | Minimum | Maximum | SampleCount | pNN[.N]
    period_s: float  # box seconds
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str = "missing"


@dataclass(frozen=True)
class Evaluation:
    state: str
    reason: str
    datapoints: tuple[float | None, ...]  # oldest first, one per evaluated period
    period_starts: tuple[float, ...]


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def statistic(points: Sequence[Point], name: str) -> float | None:
    """One statistic over the points of a period; None when the period has none to give."""
    if not points:
        return None
    count = sum(p.count for p in points)
    if name == "Sum":
        return sum(p.total for p in points)
    if name == "SampleCount":
        return count
    if name == "Average":
        return sum(p.total for p in points) / count if count else None
    if name == "Minimum":
        return min(p.low for p in points)
    if name == "Maximum":
        return max(p.high for p in points)
    match = PERCENTILE.match(name)
    if match:
        raw = [v for p in points for v in p.values]
        return percentile(raw, float(match.group(1))) if raw else None
    raise ValueError(f"statistic {name!r} is not evaluated by the box ({', '.join(SIMPLE_STATISTICS)}, pNN)")


def supported(name: str) -> bool:
    return name in SIMPLE_STATISTICS or PERCENTILE.match(name) is not None


def periods(now: float, period_real_s: float, count: int, delay_s: float = 0.0) -> list[float]:
    """Start times of the last `count` complete periods (aligned to multiples of the period) before `now - delay_s`:
    data for a period keeps arriving until `delay_s` after it ends."""
    end = math.floor((now - delay_s) / period_real_s) * period_real_s
    return [end - (count - i) * period_real_s for i in range(count)]


def datapoints(
    points: Sequence[Point], stat: str, starts: Sequence[float], period_real_s: float
) -> tuple[float | None, ...]:
    ordered = sorted(points, key=lambda p: p.timestamp)
    out: list[float | None] = []
    for start in starts:
        inside = [p for p in ordered if start <= p.timestamp < start + period_real_s]
        out.append(statistic(inside, stat))
    return tuple(out)


def evaluate(
    rule: AlarmRule,
    points: Sequence[Point],
    now: float,
    *,
    scale: float = 1.0,
    delay_s: float = 0.0,
    current: str = INSUFFICIENT_DATA,
) -> Evaluation:
    """The alarm's state after its last `evaluation_periods` complete periods; `current` is its state before
    (TreatMissingData ignore keeps it when nothing is known)."""
    period = rule.period_s * scale
    starts = periods(now, period, rule.evaluation_periods, delay_s)
    values = datapoints(points, rule.statistic, starts, period)
    compare, words = COMPARISONS[rule.comparison]
    breaching = [v is not None and compare(v, rule.threshold) for v in values]
    missing = sum(1 for v in values if v is None)
    bad = sum(breaching) + (missing if rule.treat_missing == "breaching" else 0)
    needed = min(rule.datapoints_to_alarm, rule.evaluation_periods)
    shown = ", ".join(f"{v:g}" if v is not None else "missing" for v in values)
    when = _stamp(starts[-1]) if starts else "-"
    if bad >= needed:
        state = ALARM
    elif missing == len(values) and rule.treat_missing in ("missing", "ignore"):
        state = current if rule.treat_missing == "ignore" else INSUFFICIENT_DATA
    else:
        state = OK
    if state == ALARM:
        reason = (
            f"Threshold Crossed: {bad} out of the last {len(values)} datapoints [{shown}] (latest period {when}) "
            f"{'was' if bad == 1 else 'were'} {words} the threshold ({rule.threshold:g}) "
            f"(minimum {needed} datapoint{'s' if needed != 1 else ''} for ALARM)."
        )
    elif state == OK:
        reason = (
            f"Threshold Crossed: {len(values) - bad} out of the last {len(values)} datapoints [{shown}] "
            f"(latest period {when}) {'was' if len(values) - bad == 1 else 'were'} not {words} the threshold "
            f"({rule.threshold:g})."
        )
    else:
        reason = f"Insufficient Data: {len(values)} datapoint(s) were unknown (latest period {when})."
    return Evaluation(state, reason, values, tuple(starts))


def _stamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%d/%m/%y %H:%M:%S")
