"""Autoscaling, executed: a target tracking policy registered through boto3 on an endpoint of the scaled box (time
scale 0.01) scales it out under a load step and back in when the load stops; DescribeEndpoint reports the count.
Waits poll DescribeEndpoint for a state; nothing sleeps to order events."""

from __future__ import annotations

from typing import Any

import pytest

from sagebox.box.inventory import list_endpoints
from sagebox.box.reconciler import load_fleet
from sagebox.box.state import BoxState
from tests.sagebox.box.conftest import ScaledBox
from tests.sagebox.box.test_guardrails_e2e import DEADLINE_S, Load, create_model, watch

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def box(scaled_box: ScaledBox) -> ScaledBox:
    sagemaker = scaled_box.client("sagemaker")
    sagemaker.create_endpoint(EndpointName="as-load", EndpointConfigName=create_model(scaled_box, "as-load", "good", 1))
    sagemaker.get_waiter("endpoint_in_service").wait(
        EndpointName="as-load", WaiterConfig={"Delay": 1, "MaxAttempts": int(DEADLINE_S)}
    )
    return scaled_box


def test_a_load_step_scales_out_and_back_in(box: ScaledBox) -> None:
    autoscaling = box.client("application-autoscaling")
    resource = "endpoint/as-load/variant/AllTraffic"
    autoscaling.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=1,
        MaxCapacity=2,
    )
    autoscaling.put_scaling_policy(
        PolicyName="as-load-invocations",
        ServiceNamespace="sagemaker",
        ResourceId=resource,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 20.0,  # invocations per instance per (box) minute: ~33 requests/s real at scale 0.01
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
            "ScaleOutCooldown": 60,
            "ScaleInCooldown": 60,
        },
    )

    def count(described: dict[str, Any]) -> int:
        return int(described["ProductionVariants"][0]["CurrentInstanceCount"])

    with Load(box, "as-load", threads=3) as load:
        out = watch(box, "as-load", lambda d: count(d) == 2 and d["EndpointStatus"] == "InService")
    assert load.outcomes["ok"] > 0 and set(load.outcomes) == {"ok"}
    assert "Updating" in [s["status"] for s in out]  # UpdateEndpointWeightsAndCapacities, as the policy scaled
    described = box.client("sagemaker").describe_endpoint(EndpointName="as-load")
    assert described["ProductionVariants"][0]["DesiredInstanceCount"] == 2
    running = load_fleet(box.aws.state_dir)["as-load"]["variants"][0]["instances"]
    assert len(running) == 2 and all(i["alive"] for i in running)
    # No load: 15 (box) minutes under the target, then back to MinCapacity.
    back = watch(box, "as-load", lambda d: count(d) == 1 and d["EndpointStatus"] == "InService")
    assert back[-1]["count"] == 1
    scaling = load_fleet(box.aws.state_dir)["as-load"]["scaling"]
    assert [(s["from"], s["to"]) for s in scaling] == [(1, 2), (2, 1)]
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))["as-load"]
    assert shown.scaling.startswith("AllTraffic 2 -> 1 at ") and shown.variants[0].instances == 1
