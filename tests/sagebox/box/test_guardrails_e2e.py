"""Deployment guardrails and autoscaling, executed: a real embedded AWS (time scale 0.01, set by its environment
variable as a user would) with serving processes, driven through boto3 only.

An update to a model that answers 500s and one to a model that is too slow both roll back on their alarms while a
load runs, and no request on the old fleet's share fails; a good update completes and the old fleet stops after
the termination wait (test_autoscaling_e2e.py runs a load step on the same box). Nothing here sleeps to order
events: every
wait polls DescribeEndpoint (or CloudWatch) for a state, with a generous deadline that only guards against a hang.
The slow model is ~0.25 s per call against a 0.1 s p90 alarm, and the good one a few ms (guardrail_models.py).
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagebox.box import processes
from sagebox.box.inventory import list_endpoints
from sagebox.box.reconciler import load_fleet
from sagebox.box.state import BoxState
from tests.sagebox.box.conftest import ScaledBox
from tests.sagebox.box.guardrail_models import Behaviour

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROLE = "arn:aws:iam::123456789012:role/SageboxExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:test"
QUESTION = json.dumps({"question": "Which basin?", "context": "The Amazon rainforest covers the Amazon basin."})
DEADLINE_S = 180.0  # guards against a hang only
LATENCY_ALARM_US = 100_000  # p90 > 100 ms
ENDPOINTS = {"gr-500": 2, "gr-slow": 1, "gr-good": 2}


def create_model(box: ScaledBox, endpoint: str, behaviour: Behaviour, instances: int, suffix: str = "") -> str:
    name = f"{endpoint}-{behaviour}{suffix}"
    sagemaker = box.client("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://models/{behaviour}.tar.gz"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": name,
                "InstanceType": "ml.c6i.xlarge",
                "InitialInstanceCount": instances,
            }
        ],
    )
    return name


def create_alarms(box: ScaledBox, endpoint: str) -> tuple[str, str]:
    """The stacks' two rollback alarms (infra/stacks/monitoring.py), the latency one 2 of 3 minutes."""
    cloudwatch = box.client("cloudwatch")
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]
    errors, latency = f"{endpoint}-5xx-errors", f"{endpoint}-model-latency-p90"
    cloudwatch.put_metric_alarm(
        AlarmName=errors,
        Namespace="AWS/SageMaker",
        MetricName="Invocation5XXErrors",
        Dimensions=dims,
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="notBreaching",
    )
    cloudwatch.put_metric_alarm(
        AlarmName=latency,
        Namespace="AWS/SageMaker",
        MetricName="ModelLatency",
        Dimensions=dims,
        ExtendedStatistic="p90",
        Period=60,
        EvaluationPeriods=3,
        DatapointsToAlarm=2,
        Threshold=LATENCY_ALARM_US,
        ComparisonOperator="GreaterThanThreshold",
        TreatMissingData="notBreaching",
    )
    return errors, latency


def deployment(routing: dict[str, Any], alarms: tuple[str, ...], termination_s: int = 60) -> dict[str, Any]:
    return {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": routing,
            "TerminationWaitInSeconds": termination_s,
            "MaximumExecutionTimeoutInSeconds": 3600,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": a} for a in alarms]},
    }


@pytest.fixture(scope="module")
def box(scaled_box: ScaledBox) -> ScaledBox:
    """The scaled box, with the base endpoint of every test started at once (their instances start together)."""
    sagemaker = scaled_box.client("sagemaker")
    for name, instances in ENDPOINTS.items():
        sagemaker.create_endpoint(
            EndpointName=name, EndpointConfigName=create_model(scaled_box, name, "good", instances)
        )
    for name in ENDPOINTS:
        sagemaker.get_waiter("endpoint_in_service").wait(
            EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": int(DEADLINE_S)}
        )
    return scaled_box


@dataclass
class Load:
    """Client threads invoking an endpoint without pause; what each request got."""

    box: ScaledBox
    endpoint: str
    threads: int = 3
    outcomes: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Load:
        for _ in range(self.threads):
            worker = threading.Thread(target=self._run, daemon=True)
            worker.start()
            self._workers.append(worker)
        return self

    def _run(self) -> None:
        runtime = self.box.client("sagemaker-runtime")
        while not self._stop.is_set():
            try:
                runtime.invoke_endpoint(EndpointName=self.endpoint, Body=QUESTION, ContentType="application/json")
                outcome = "ok"
            except ClientError as exc:
                code = exc.response["Error"]["Code"]
                outcome = f"{code} {exc.response.get('OriginalStatusCode', '')}".strip()
            self.outcomes[outcome] += 1

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join()


def watch(box: ScaledBox, endpoint: str, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """DescribeEndpoint (and what runs behind it) polled until `done`; every distinct state seen."""
    sagemaker = box.client("sagemaker")
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = sagemaker.describe_endpoint(EndpointName=endpoint)
        fleet = load_fleet(box.aws.state_dir).get(endpoint, {})
        update = fleet.get("update") or {}
        state = {
            "status": described["EndpointStatus"],
            "config": described["EndpointConfigName"],
            "pending": (described.get("PendingDeploymentSummary") or {}).get("EndpointConfigName"),
            "share": update.get("share"),
            "new_pids": tuple(i["pid"] for v in update.get("variants", []) for i in v["instances"]),
            "count": described["ProductionVariants"][0].get("CurrentInstanceCount"),
            "reason": described.get("FailureReason", ""),
        }
        if not seen or state != seen[-1]:
            seen.append(state)
        if done(described):
            return seen
        time.sleep(0.1)
    raise AssertionError(f"{endpoint} did not reach the awaited state; seen: {seen}")


def settled(described: dict[str, Any]) -> bool:
    return described["EndpointStatus"] == "InService" and not described.get("PendingDeploymentSummary")


def metric_sum(box: ScaledBox, endpoint: str, metric: str, config: str | None = None) -> float:
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}]
    if config:
        dims.append({"Name": "EndpointConfigName", "Value": config})
    answer = box.client("cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName=metric,
        Dimensions=dims,
        StartTime=box.started - datetime.timedelta(minutes=1),
        EndTime=datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1),
        Period=60,
        Statistics=["Sum"],
    )
    return float(sum(point["Sum"] for point in answer["Datapoints"]))


def published(box: ScaledBox, endpoint: str, metric: str, config: str, expected: float) -> float:
    """The per-config sum once the gateway's last flush has landed (it publishes once a second)."""
    deadline = time.monotonic() + 30
    value = metric_sum(box, endpoint, metric, config)
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.2)
        value = metric_sum(box, endpoint, metric, config)
    return value


def exits(pids: tuple[int, ...]) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not any(processes.alive(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def test_an_update_to_a_model_that_answers_500s_rolls_back_and_the_old_fleet_fails_nothing(box: ScaledBox) -> None:
    errors, latency = create_alarms(box, "gr-500")
    new = create_model(box, "gr-500", "fail", 2)
    canary = {"Type": "CANARY", "WaitIntervalInSeconds": 900, "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1}}
    with Load(box, "gr-500") as load:
        box.client("sagemaker").update_endpoint(
            EndpointName="gr-500", EndpointConfigName=new, DeploymentConfig=deployment(canary, (errors, latency))
        )
        seen = watch(box, "gr-500", settled)
    statuses = [s["status"] for s in seen]
    assert "Updating" in statuses and "RollingBack" in statuses and statuses[-1] == "InService"
    assert 0.5 in [s["share"] for s in seen]  # the canary: one instance of two took half the traffic
    final = seen[-1]
    assert final["config"] == "gr-500-good" and final["pending"] is None
    assert f"Update to endpoint config {new} was rolled back: alarm {errors} went into ALARM" in final["reason"]
    # Every failed request failed on the new fleet's share; the old fleet answered everything it got.
    failed = sum(n for outcome, n in load.outcomes.items() if outcome != "ok")
    assert failed > 0 and set(load.outcomes) == {"ok", "ModelError 500"}
    assert published(box, "gr-500", "Invocation5XXErrors", new, failed) == failed
    assert published(box, "gr-500", "Invocation5XXErrors", "gr-500-good", 0.0) == 0.0
    ok = load.outcomes["ok"]  # every answered request was the old fleet's
    assert ok > 0 and published(box, "gr-500", "Invocations", "gr-500-good", ok) == ok
    assert exits(next(s["new_pids"] for s in seen if s["new_pids"]))  # the new fleet stopped
    # What `sagebox status` prints from.
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))["gr-500"]
    assert (shown.status, shown.rollbacks, shown.update) == ("InService", 1, "")
    assert (
        shown.last_update.startswith("rolled back ") and f"({new}): alarm {errors} went into ALARM" in shown.last_update
    )
    assert [(v.name, v.weight, v.instances) for v in shown.variants] == [("AllTraffic", 1.0, 2)]


def test_an_update_to_a_slow_model_rolls_back_on_its_latency_alarm(box: ScaledBox) -> None:
    errors, latency = create_alarms(box, "gr-slow")
    new = create_model(box, "gr-slow", "slow", 1)
    all_at_once = {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 900}
    with Load(box, "gr-slow") as load:
        box.client("sagemaker").update_endpoint(
            EndpointName="gr-slow", EndpointConfigName=new, DeploymentConfig=deployment(all_at_once, (errors, latency))
        )
        seen = watch(box, "gr-slow", settled)
        after_rollback = sum(load.outcomes.values())
        watch(box, "gr-slow", lambda d: sum(load.outcomes.values()) > after_rollback + 20)  # the old fleet serves
    final = seen[-1]
    assert (final["status"], final["config"]) == ("InService", "gr-slow-good")
    assert f"alarm {latency} went into ALARM" in final["reason"] and "RollingBack" in [s["status"] for s in seen]
    assert set(load.outcomes) == {"ok"}  # slow, never failing: the old fleet's share and the new one's answered
    assert exits(next(s["new_pids"] for s in seen if s["new_pids"]))


def test_a_good_update_shifts_linearly_completes_and_stops_the_old_fleet_after_the_termination_wait(
    box: ScaledBox,
) -> None:
    errors, latency = create_alarms(box, "gr-good")
    old_pids = tuple(i["pid"] for v in load_fleet(box.aws.state_dir)["gr-good"]["variants"] for i in v["instances"])
    new = create_model(box, "gr-good", "good", 2, suffix="-v2")
    linear = {
        "Type": "LINEAR",
        "WaitIntervalInSeconds": 300,
        "LinearStepSize": {"Type": "CAPACITY_PERCENT", "Value": 50},
    }
    with Load(box, "gr-good") as load:
        box.client("sagemaker").update_endpoint(
            EndpointName="gr-good",
            EndpointConfigName=new,
            DeploymentConfig=deployment(linear, (errors, latency), termination_s=120),
        )
        seen = watch(box, "gr-good", settled)
    final = seen[-1]
    assert (final["config"], final["reason"]) == (new, "")
    shares = [s["share"] for s in seen if s["share"] is not None]
    assert shares == sorted(shares) and 0.5 in shares and 1.0 in shares  # two linear steps of half the fleet
    assert set(load.outcomes) == {"ok"}
    described = box.client("sagemaker").describe_endpoint(EndpointName="gr-good")
    assert described["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TerminationWaitInSeconds"] == 120
    assert exits(old_pids)  # after the termination wait (1.2 s here)
    assert metric_sum(box, "gr-good", "Invocations", new) > 0
