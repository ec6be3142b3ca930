"""moto's CloudWatch, made to hold what the runtime gateway measures and to run alarms (listed in infra/README.md).

1. Templates: moto's CloudFormation skipped AWS::CloudWatch::Alarm ("No Moto CloudFormation support"); here the
   stacks' alarms are created in moto's CloudWatch (Ref: the alarm's name, GetAtt Arn), updated and deleted with
   their stack.
2. Alarms are evaluated: moto stores alarms but never changes their state. The box's control plane evaluates
   every metric alarm (`evaluate_alarms`, with sagebox.box.alarms) on every pass, on box time, and sets its
   state and reason as CloudWatch would (DescribeAlarms shows them); deployment guardrails read those states.
3. Dimensions match exactly: CloudWatch treats every combination of dimensions as its own metric; moto's
   GetMetricStatistics matched a query's dimensions as a subset, so a query for EndpointName+VariantName also
   summed the per-config (EndpointConfigName) series the gateway publishes beside it.
4. Values are stored compactly: moto kept one object per value of a PutMetricData `Values` list (~520 bytes each,
   measured with tracemalloc); the gateway publishes every request's latency, so a datum is kept as one
   distribution (its statistic set plus the raw values, which percentiles need), and data older than
   `RETENTION_S` box seconds (CloudWatch keeps its one-second data 3 hours) is dropped.
"""

from __future__ import annotations

import datetime
import json
import threading
from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from moto.cloudwatch.models import (
    CloudWatchBackend,
    MetricAggregatedDatum,
    MetricDatum,
    MetricDatumBase,
    Statistics,
    cloudwatch_backends,
    daterange,
)
from moto.core.common_models import CloudFormationModel

from sagebox.box import alarms as evaluator
from sagebox.box.embedded_aws.cfn_attributes import ArnAttribute

RETENTION_S = 3 * 3600.0
# A datum with more samples than this (Values x Counts) keeps its statistic set only (no percentile).
MAX_RAW_SAMPLES = 100_000

_lock = threading.RLock()
_applied = False

SeriesKey = tuple[str, str, frozenset[tuple[str, str]]]


class DistributionDatum(MetricAggregatedDatum):
    """A PutMetricData datum given as Values (and Counts): moto's statistic set, plus the raw values."""

    def __init__(self, namespace: str, name: str, values: array, dims: list[dict[str, str]], timestamp: Any, unit: Any):
        super().__init__(
            namespace,
            name,
            min_stat=min(values) if values else 0.0,
            max_stat=max(values) if values else 0.0,
            sample_count=float(len(values)),
            sum_stat=float(sum(values)),
            dimensions=dims,
            timestamp=timestamp,
            unit=unit,
        )
        self.values = values


def epoch(moment: datetime.datetime) -> float:
    """A moto timestamp (naive means UTC) as epoch seconds."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _key(namespace: str, name: str, dimensions: Iterable[Any]) -> SeriesKey:
    pairs = set()
    for d in dimensions:
        if isinstance(d, Mapping):
            pairs.add((str(d["Name"]), str(d.get("Value", ""))))
        else:
            pairs.add((str(d.name), str(d.value)))
    return namespace, name, frozenset(pairs)


def _series(backend: CloudWatchBackend) -> defaultdict[SeriesKey, list[MetricDatumBase]]:
    found: defaultdict[SeriesKey, list[MetricDatumBase]] | None = getattr(backend, "box_series", None)
    if found is None:
        found = defaultdict(list)
        backend.box_series = found  # type: ignore[attr-defined]
    return found


def _put_metric_data(self: CloudWatchBackend, namespace: str, metric_data: list[dict[str, Any]]) -> None:
    for index, metric in enumerate(metric_data):
        self._validate_parameters_put_metric_data(metric, index + 1)
    added: list[MetricDatumBase] = []
    for metric in metric_data:
        timestamp = metric.get("Timestamp")
        name = metric["MetricName"]
        dims = metric.get("Dimensions") or []
        unit = metric.get("Unit")
        if metric.get("Values"):
            values = [float(v) for v in metric["Values"]]
            counts = [int(float(c)) for c in metric.get("Counts") or [1] * len(values)]
            samples = sum(counts)
            if samples <= MAX_RAW_SAMPLES:
                raw = array("d", (v for v, c in zip(values, counts, strict=True) for _ in range(c)))
                added.append(DistributionDatum(namespace, name, raw, dims, timestamp, unit))
            else:
                added.append(
                    MetricAggregatedDatum(
                        namespace,
                        name,
                        min_stat=min(values),
                        max_stat=max(values),
                        sample_count=float(samples),
                        sum_stat=sum(v * c for v, c in zip(values, counts, strict=True)),
                        dimensions=dims,
                        timestamp=timestamp,
                        unit=unit,
                    )
                )
        elif metric.get("StatisticValues"):
            stats = metric["StatisticValues"]
            added.append(
                MetricAggregatedDatum(
                    namespace,
                    name,
                    min_stat=float(stats["Minimum"]),
                    max_stat=float(stats["Maximum"]),
                    sample_count=float(stats["SampleCount"]),
                    sum_stat=float(stats["Sum"]),
                    dimensions=dims,
                    timestamp=timestamp,
                    unit=unit,
                )
            )
        else:
            added.append(MetricDatum(namespace, name, float(metric.get("Value", 0)), dims, timestamp, unit))
    with _lock:
        self.metric_data.extend(added)
        series = _series(self)
        for datum in added:
            series[_key(datum.namespace, datum.name, datum.dimensions)].append(datum)


def _get_metric_statistics(
    self: CloudWatchBackend,
    namespace: str,
    metric_name: str,
    start_time: datetime.datetime,
    end_time: datetime.datetime,
    period: int,
    stats: list[str],
    dimensions: list[dict[str, str]],
    unit: str | None = None,
) -> list[Statistics]:
    """moto's GetMetricStatistics, with CloudWatch's exact dimension match."""
    from moto.cloudwatch.exceptions import InvalidParameterValue

    start_time = start_time.replace(microsecond=0)
    end_time = end_time.replace(microsecond=0)
    if start_time >= end_time:
        raise InvalidParameterValue("The parameter StartTime must be less than the parameter EndTime.")
    with _lock:
        candidates = list(_series(self).get(_key(namespace, metric_name, dimensions or []), []))
    found = sorted(
        (d for d in candidates if start_time <= d.timestamp < end_time and (not unit or d.unit == unit)),
        key=lambda d: d.timestamp,
    )
    if not found:
        return []
    step = datetime.timedelta(seconds=period)
    data: list[Statistics] = []
    index = 0
    for start in daterange(found[0].timestamp, found[-1].timestamp + step, step):
        bucket = Statistics(stats, start)
        while index < len(found) and found[index].timestamp < start + step:
            bucket.metric_data.append(found[index])
            bucket.unit = found[index].unit
            index += 1
        if bucket.metric_data:
            data.append(bucket)
    return data


def prune(backend: CloudWatchBackend, older_than: float) -> int:
    """Drop data measured before `older_than` (epoch seconds); how many datums went."""
    with _lock:
        kept = [d for d in backend.metric_data if epoch(d.timestamp) >= older_than]
        dropped = len(backend.metric_data) - len(kept)
        if dropped:
            backend.metric_data = kept
            series = _series(backend)
            for key in list(series):
                series[key] = [d for d in series[key] if epoch(d.timestamp) >= older_than]
                if not series[key]:
                    del series[key]
    return dropped


def points(
    backend: CloudWatchBackend, namespace: str, name: str, dimensions: Iterable[Any], since: float
) -> list[evaluator.Point]:
    """The exact series' data measured since `since` (epoch seconds), as the evaluator reads it."""
    with _lock:
        data = list(_series(backend).get(_key(namespace, name, dimensions), []))
    found = []
    for datum in data:
        at = epoch(datum.timestamp)
        if at < since:
            continue
        if isinstance(datum, DistributionDatum):
            found.append(evaluator.Point(at, datum.sample_count, datum.sum, datum.min, datum.max, tuple(datum.values)))
        elif isinstance(datum, MetricAggregatedDatum):
            found.append(evaluator.Point(at, datum.sample_count, datum.sum, datum.min, datum.max))
        elif isinstance(datum, MetricDatum):
            found.append(evaluator.Point.of(at, [datum.value]))
    return found


def rule_of(alarm: Any) -> evaluator.AlarmRule | None:
    """The evaluator's view of a moto alarm; None for what the box does not evaluate (metric math, composite)."""
    if alarm.metric_data_queries or not alarm.metric_name or getattr(alarm, "rule", None):
        return None
    statistic = alarm.extended_statistic or alarm.statistic
    if not statistic or not evaluator.supported(str(statistic)):
        return None
    evaluation_periods = int(alarm.evaluation_periods)
    return evaluator.AlarmRule(
        name=str(alarm.name),
        statistic=str(statistic),
        period_s=float(alarm.period),
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=int(alarm.datapoints_to_alarm or evaluation_periods),
        threshold=float(alarm.threshold),
        comparison=str(alarm.comparison_operator),
        treat_missing=str(alarm.treat_missing_data or "missing"),
    )


def evaluate_alarms(backend: CloudWatchBackend, now: float, scale: float, delay_s: float) -> dict[str, str]:
    """Evaluate every metric alarm at `now` (epoch seconds), set the states that changed; the alarms in ALARM
    (name -> reason)."""
    firing: dict[str, str] = {}
    for alarm in list(backend.alarms.values()):
        rule = rule_of(alarm)
        if rule is None:
            continue
        since = now - (rule.evaluation_periods + 1) * rule.period_s * scale - delay_s
        data = points(backend, alarm.namespace, alarm.metric_name, alarm.dimensions, since)
        result = evaluator.evaluate(rule, data, now, scale=scale, delay_s=delay_s, current=alarm.state_value)
        if result.state != alarm.state_value:
            reason_data = {
                "version": "1.0",
                "queryDate": datetime.datetime.fromtimestamp(now, datetime.UTC).isoformat(),
                "statistic": rule.statistic,
                "period": rule.period_s,
                "recentDatapoints": [v for v in result.datapoints if v is not None],
                "threshold": rule.threshold,
                "evaluatedDatapoints": [
                    {"timestamp": datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(), "value": v}
                    for t, v in zip(result.period_starts, result.datapoints, strict=True)
                    if v is not None
                ],
            }
            alarm.update_state(result.reason, json.dumps(reason_data), result.state)
        if alarm.state_value == evaluator.ALARM:
            firing[str(alarm.name)] = str(alarm.state_reason)
    return firing


class AlarmResource(ArnAttribute, CloudFormationModel):
    """AWS::CloudWatch::Alarm, created in moto's CloudWatch."""

    def __init__(self, name: str, arn: str) -> None:
        self.name = name
        self.arn = arn

    @property
    def physical_resource_id(self) -> str:
        return self.name

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> AlarmResource:
        props = cloudformation_json.get("Properties", {})
        backend = cloudwatch_backends[account_id][region_name]
        name = str(props.get("AlarmName") or resource_name)
        alarm = backend.put_metric_alarm(
            name=name,
            namespace=props.get("Namespace", ""),
            metric_name=props.get("MetricName", ""),
            metric_data_queries=None,
            comparison_operator=props["ComparisonOperator"],
            evaluation_periods=int(props["EvaluationPeriods"]),
            datapoints_to_alarm=int(props["DatapointsToAlarm"]) if props.get("DatapointsToAlarm") else None,
            period=int(props.get("Period", 60)),
            threshold=float(props.get("Threshold", 0)),
            statistic=props.get("Statistic"),
            extended_statistic=props.get("ExtendedStatistic"),
            description=props.get("AlarmDescription", ""),
            dimensions=[{"Name": d["Name"], "Value": d["Value"]} for d in props.get("Dimensions", [])],
            alarm_actions=list(props.get("AlarmActions", [])),
            ok_actions=list(props.get("OKActions", [])),
            insufficient_data_actions=list(props.get("InsufficientDataActions", [])),
            unit=props.get("Unit"),
            actions_enabled=props.get("ActionsEnabled", True) in (True, "true"),
            treat_missing_data=props.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=props.get("EvaluateLowSampleCountPercentile"),
            tags=props.get("Tags"),
        )
        return cls(alarm.name, alarm.alarm_arn)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: AlarmResource,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> AlarmResource:
        name = cloudformation_json.get("Properties", {}).get("AlarmName") or original_resource.name
        if name != original_resource.name:
            cloudwatch_backends[account_id][region_name].delete_alarms([original_resource.name])
        return cls.create_from_cloudformation_json(name, cloudformation_json, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([resource_name])


def apply() -> None:
    """Install the patches (idempotent)."""
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    CloudWatchBackend.put_metric_data = _put_metric_data  # type: ignore[method-assign]
    CloudWatchBackend.get_metric_statistics = _get_metric_statistics  # type: ignore[method-assign]
    _refresh_cloudformation_models()


def _refresh_cloudformation_models() -> None:
    """moto caches its CloudFormation model map on first use; a model defined later must clear it."""
    from moto.cloudformation import parsing

    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()
