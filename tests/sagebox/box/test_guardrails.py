"""Deployment guardrails' pure logic: the DeploymentConfig as SageMaker reads it, traffic steps, and a rollout driven
by an injected box clock and alarm states (no process, no sleep)."""

from __future__ import annotations

from typing import Any

import pytest

from sagebox.box.guardrails import (
    COMPLETED,
    IN_PROGRESS,
    ROLLED_BACK,
    DeploymentPolicy,
    GuardrailError,
    Rollout,
)


def config(kind: str = "ALL_AT_ONCE", wait: int = 300, termination: int = 120, **routing: Any) -> dict[str, Any]:
    return {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {"Type": kind, "WaitIntervalInSeconds": wait, **routing},
            "TerminationWaitInSeconds": termination,
            "MaximumExecutionTimeoutInSeconds": 1800,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "ep-5xx"}, {"AlarmName": "ep-p90"}]},
    }


def test_the_stacks_deployment_config_reads_as_sagemaker_reads_it() -> None:
    policy = DeploymentPolicy.from_config(config())
    assert (policy.traffic, policy.wait_s, policy.termination_wait_s) == ("ALL_AT_ONCE", 300, 120)
    assert policy.max_execution_s == 1800 and policy.alarms == ("ep-5xx", "ep-p90")
    assert policy.steps(1) == (1.0,)
    assert DeploymentPolicy.from_config(None) == DeploymentPolicy()  # SageMaker's default: all at once, no bake


def test_canary_and_linear_steps_follow_the_new_fleets_capacity() -> None:
    canary = DeploymentPolicy.from_config(config("CANARY", CanarySize={"Type": "INSTANCE_COUNT", "Value": 1}))
    assert canary.steps(2) == (0.5, 1.0) and canary.steps(4) == (0.25, 1.0)
    percent = DeploymentPolicy.from_config(config("CANARY", CanarySize={"Type": "CAPACITY_PERCENT", "Value": 10}))
    assert percent.steps(3) == (0.1, 1.0)
    linear = DeploymentPolicy.from_config(config("LINEAR", LinearStepSize={"Type": "CAPACITY_PERCENT", "Value": 30}))
    assert linear.steps(5) == pytest.approx((0.3, 0.6, 0.9, 1.0))
    by_instance = DeploymentPolicy.from_config(config("LINEAR", LinearStepSize={"Type": "INSTANCE_COUNT", "Value": 1}))
    assert by_instance.steps(4) == (0.25, 0.5, 0.75, 1.0)


@pytest.mark.parametrize(
    ("deployment", "message"),
    [
        (config("CANARY"), "CanarySize is required"),
        (config("LINEAR", LinearStepSize={"Type": "PERCENT", "Value": 10}), "LinearStepSize.Type must be"),
        (config("SHADOW"), "must be ALL_AT_ONCE, CANARY or LINEAR"),
        (config(wait=4000), "WaitIntervalInSeconds 4000 is outside 0-3600"),
        ({"RollingUpdatePolicy": {"MaximumBatchSize": {}}}, "RollingUpdatePolicy is not run by the box"),
    ],
)
def test_a_config_sagemaker_refuses_is_one_clear_error(deployment: dict[str, Any], message: str) -> None:
    with pytest.raises(GuardrailError, match=message):
        DeploymentPolicy.from_config(deployment)


def test_a_canary_larger_than_half_the_fleet_is_refused() -> None:
    policy = DeploymentPolicy.from_config(config("CANARY", CanarySize={"Type": "INSTANCE_COUNT", "Value": 1}))
    policy.check_fleet(2)
    with pytest.raises(GuardrailError, match="more than 50% of the new fleet's 1 instance"):
        policy.check_fleet(1)


def test_all_at_once_bakes_then_completes_and_the_old_fleet_waits_for_termination() -> None:
    rollout = Rollout(DeploymentPolicy.from_config(config()), instances=1, requested_at=0.0)
    first = rollout.advance(10.0, {})
    assert (first.share, first.outcome, first.status, first.changed) == (1.0, IN_PROGRESS, "Baking", True)
    assert rollout.advance(309.0, {}).changed is False  # still baking
    done = rollout.advance(310.0, {})
    assert (done.outcome, done.share, done.changed) == (COMPLETED, 1.0, True)
    assert rollout.retire_at() == 310.0 + 120.0
    assert rollout.advance(1000.0, {"ep-5xx": "late"}).outcome == COMPLETED  # nothing rolls back a finished update


def test_canary_shifts_its_share_then_the_rest_with_a_final_bake() -> None:
    policy = DeploymentPolicy.from_config(config("CANARY", wait=60, CanarySize={"Type": "INSTANCE_COUNT", "Value": 1}))
    rollout = Rollout(policy, instances=2, requested_at=0.0)
    shares = [(t, rollout.advance(t, {}).share) for t in (0.0, 30.0, 60.0, 90.0)]
    assert shares == [(0.0, 0.5), (30.0, 0.5), (60.0, 1.0), (90.0, 1.0)]
    assert rollout.advance(120.0, {}).outcome == COMPLETED


def test_an_alarm_while_baking_rolls_back_with_the_alarm_named() -> None:
    policy = DeploymentPolicy.from_config(config("CANARY", wait=60, CanarySize={"Type": "INSTANCE_COUNT", "Value": 1}))
    rollout = Rollout(policy, instances=2, requested_at=0.0)
    rollout.advance(0.0, {})
    assert rollout.advance(20.0, {"someone-elses-alarm": "breached"}).outcome == IN_PROGRESS  # not a rollback alarm
    step = rollout.advance(40.0, {"ep-5xx": "Threshold Crossed: 1 out of the last 1 datapoints [3]"})
    assert (step.outcome, step.share, step.changed) == (ROLLED_BACK, 0.0, True)
    assert "alarm ep-5xx went into ALARM while baking step 1 of 2 (50% of traffic on the new fleet)" in step.message
    assert rollout.retire_at() is None


def test_the_execution_timeout_rolls_back() -> None:
    deployment = config(wait=3600)
    deployment["BlueGreenUpdatePolicy"]["MaximumExecutionTimeoutInSeconds"] = 600
    rollout = Rollout(DeploymentPolicy.from_config(deployment), instances=1, requested_at=0.0)
    assert rollout.advance(100.0, {}).outcome == IN_PROGRESS
    step = rollout.advance(700.0, {})
    assert step.outcome == ROLLED_BACK and "MaximumExecutionTimeoutInSeconds (600 s)" in step.message


def test_without_a_bake_every_step_passes_at_once() -> None:
    policy = DeploymentPolicy.from_config(
        config("LINEAR", wait=0, termination=0, LinearStepSize={"Type": "CAPACITY_PERCENT", "Value": 50})
    )
    rollout = Rollout(policy, instances=2, requested_at=0.0)
    step = rollout.advance(5.0, {})
    assert step.outcome == COMPLETED and rollout.retire_at() == 5.0


def test_a_late_pass_does_not_shorten_the_next_bake() -> None:
    policy = DeploymentPolicy.from_config(
        config("LINEAR", wait=60, LinearStepSize={"Type": "CAPACITY_PERCENT", "Value": 50})
    )
    rollout = Rollout(policy, instances=2, requested_at=0.0)
    rollout.advance(0.0, {})
    assert rollout.advance(75.0, {}).share == 1.0  # the second step started at 60, not 75
    assert rollout.advance(119.0, {}).outcome == IN_PROGRESS
    assert rollout.advance(120.0, {}).outcome == COMPLETED
