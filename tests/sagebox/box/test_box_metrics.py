"""The gateway's measurements and fleet choice, the embedded CloudWatch's storage and alarm evaluation, and the
CloudFormation update order: in process (moto's backends under mock_aws), no server, an injected time."""

from __future__ import annotations

import datetime
import random
from collections.abc import Iterator
from typing import Any

import pytest

from sagebox.box.invocation_metrics import SERVER_ERROR, Invocation, InvocationRecorder
from sagebox.box.routes import FleetRoute, Route, VariantRoute
from sagebox.box.runtime_gateway import Picker

ACCOUNT, REGION = "123456789012", "us-east-1"


def invocation(at: float, config: str, outcome: str = "2xx", model_s: float | None = 0.004) -> Invocation:
    return Invocation(at, "ep", "AllTraffic", config, 2, outcome, model_s, 0.001)


def datum(datums: list[dict[str, Any]], name: str, config: str | None) -> dict[str, Any]:
    wanted = {"EndpointName": "ep", "VariantName": "AllTraffic", **({"EndpointConfigName": config} if config else {})}
    [found] = [
        d for d in datums if d["MetricName"] == name and {x["Name"]: x["Value"] for x in d["Dimensions"]} == wanted
    ]
    return found


def test_invocations_drain_into_per_variant_and_per_config_datums() -> None:
    recorder = InvocationRecorder(resolution_s=1.0)
    recorder.record(invocation(100.2, "blue"))
    recorder.record(invocation(100.7, "green", SERVER_ERROR, 0.002))
    recorder.record(invocation(100.9, "green", SERVER_ERROR, None))  # the container never answered
    datums = recorder.drain()
    assert recorder.drain() == [] and len(recorder) == 0
    both = datum(datums, "Invocations", None)
    assert both["StatisticValues"]["SampleCount"] == 3 and both["StatisticValues"]["Sum"] == 3
    assert both["Timestamp"] == datetime.datetime.fromtimestamp(100, datetime.UTC)
    assert datum(datums, "Invocation5XXErrors", "green")["StatisticValues"]["Sum"] == 2
    assert datum(datums, "Invocation5XXErrors", "blue")["StatisticValues"]["Sum"] == 0
    assert datum(datums, "InvocationsPerInstance", None)["StatisticValues"]["Sum"] == 1.5  # 3 requests, 2 instances
    assert sorted(datum(datums, "ModelLatency", None)["Values"]) == [2000.0, 4000.0]  # microseconds
    assert datum(datums, "ModelLatency", "blue")["Unit"] == "Microseconds"
    fine = InvocationRecorder(resolution_s=0.1)
    fine.record(invocation(100.05, "blue"))
    fine.record(invocation(100.15, "blue"))
    assert len([d for d in fine.drain() if d["MetricName"] == "Invocations"]) == 4  # two buckets, two dim sets


def test_the_new_fleet_takes_its_share_and_a_target_variant_is_found_in_either_fleet() -> None:
    blue = (VariantRoute("AllTraffic", 1.0, ("http://b1", "http://b2")),)
    green = (VariantRoute("AllTraffic", 1.0, ("http://g1",)), VariantRoute("Shadowless", 1.0, ("http://g2",)))
    route = Route("ep", blue, "v1", FleetRoute("v2", 0.25, green))
    picker = Picker(random.Random(3))
    choices = [picker.choose(route, None) for _ in range(4000)]
    share = sum(1 for c in choices if c is not None and c.config == "v2") / len(choices)
    assert 0.23 <= share <= 0.27  # seeded: the same every run
    only_green = picker.choose(route, "Shadowless")
    assert only_green is not None and (only_green.config, only_green.fleet_size) == ("v2", 1)
    assert picker.choose(route, "Missing") is None
    switched = Route("ep", blue, "v1", FleetRoute("v2", 1.0, green[:1]))
    assert {c.config for c in (picker.choose(switched, None) for _ in range(50)) if c} == {"v2"}
    assert Route("ep", blue, "v1").fleets() == [("v1", 1.0, blue)]


@pytest.fixture
def cloudwatch() -> Iterator[Any]:
    from moto import mock_aws
    from moto.cloudwatch.models import cloudwatch_backends

    from sagebox.box.embedded_aws import cloudwatch as patch

    patch.apply()
    with mock_aws():
        yield cloudwatch_backends[ACCOUNT][REGION]


def dims(config: str | None = None) -> list[dict[str, str]]:
    found = [{"Name": "EndpointName", "Value": "ep"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    return [*found, {"Name": "EndpointConfigName", "Value": config}] if config else found


def test_values_are_stored_as_one_datum_and_dimensions_match_exactly(cloudwatch: Any) -> None:
    from sagebox.box.embedded_aws.cloudwatch import DistributionDatum, points, prune

    at = datetime.datetime(2030, 1, 1, 0, 0, 10, tzinfo=datetime.UTC)
    cloudwatch.put_metric_data(
        "AWS/SageMaker",
        [{"MetricName": "ModelLatency", "Dimensions": dims(), "Timestamp": at, "Values": [1.0, 2.0, 3.0]}],
    )
    cloudwatch.put_metric_data(
        "AWS/SageMaker",
        [{"MetricName": "ModelLatency", "Dimensions": dims("v2"), "Timestamp": at, "Values": [100.0], "Counts": [2]}],
    )
    assert len(cloudwatch.metric_data) == 2 and isinstance(cloudwatch.metric_data[0], DistributionDatum)
    stats = cloudwatch.get_metric_statistics(
        "AWS/SageMaker",
        "ModelLatency",
        at - datetime.timedelta(minutes=1),
        at + datetime.timedelta(minutes=1),
        60,
        ["Sum", "SampleCount"],
        dims(),
    )
    assert [(s.sum, s.sample_count) for s in stats] == [(6.0, 3.0)]  # not the per-config series too
    [point] = points(cloudwatch, "AWS/SageMaker", "ModelLatency", dims("v2"), 0.0)
    assert point.values == (100.0, 100.0) and point.count == 2.0
    assert prune(cloudwatch, at.timestamp() + 1) == 2 and cloudwatch.metric_data == []


def test_alarms_are_evaluated_and_their_state_and_reason_set(cloudwatch: Any) -> None:
    from sagebox.box.embedded_aws.cloudwatch import evaluate_alarms

    cloudwatch.put_metric_alarm(
        name="ep-5xx", namespace="AWS/SageMaker", metric_name="Invocation5XXErrors",
        comparison_operator="GreaterThanOrEqualToThreshold", evaluation_periods=1, period=60, threshold=1.0,
        statistic="Sum", description="", dimensions=dims(), alarm_actions=[], treat_missing_data="notBreaching",
    )  # fmt: skip
    start = datetime.datetime(2030, 1, 1, 0, 1, 0, tzinfo=datetime.UTC).timestamp()
    stats = {"SampleCount": 5, "Sum": 2, "Minimum": 0, "Maximum": 1}
    at = datetime.datetime.fromtimestamp(start + 20, datetime.UTC)
    cloudwatch.put_metric_data(
        "AWS/SageMaker",
        [{"MetricName": "Invocation5XXErrors", "Dimensions": dims(), "Timestamp": at, "StatisticValues": stats}],
    )
    assert evaluate_alarms(cloudwatch, start + 30, scale=1.0, delay_s=0.0) == {}  # the minute is not over
    assert cloudwatch.alarms["ep-5xx"].state_value == "OK"
    firing = evaluate_alarms(cloudwatch, start + 61, scale=1.0, delay_s=0.0)
    assert list(firing) == ["ep-5xx"] and "1 out of the last 1 datapoints [2]" in firing["ep-5xx"]
    assert cloudwatch.alarms["ep-5xx"].state_value == "ALARM"
    assert evaluate_alarms(cloudwatch, start + 125, scale=1.0, delay_s=0.0) == {}  # a quiet minute: OK again
    assert cloudwatch.alarms["ep-5xx"].state_value == "OK"


def test_a_replaced_resource_updates_what_references_it_in_dependency_order() -> None:
    from sagebox.box.embedded_aws.cfn_updates import dependency_order, references

    resources = {
        "Endpoint": {"Properties": {"EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}}},
        "Target": {"Properties": {"ResourceId": {"Fn::Sub": "endpoint/${Endpoint.EndpointName}/variant/A"}}},
        "Config": {"Properties": {"ModelName": {"Fn::GetAtt": "Model.ModelName"}}, "DependsOn": ["Alarm"]},
        "Policy": {"Properties": {"ScalingTargetId": {"Ref": "Target"}}},
        "Model": {"Properties": {}},
        "Alarm": {"Properties": {}},
    }
    assert references(resources["Config"]) == {"Model", "Alarm"}
    assert references(resources["Target"]) == {"Endpoint"}
    order = dependency_order(resources)
    assert sorted(order) == sorted(resources)
    for before, after in (("Model", "Config"), ("Alarm", "Config"), ("Config", "Endpoint"), ("Endpoint", "Target")):
        assert order.index(before) < order.index(after)
    assert order.index("Target") < order.index("Policy")
