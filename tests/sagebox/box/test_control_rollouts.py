"""The rollout controller alone: a blue/green update's traffic shifted step by step on box time, completed (the new
fleet serves, the old one retires after the termination wait) or rolled back (an alarm while baking, the execution
timeout), on stand-ins with an injected clock and alarm states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagebox.box.control.fleet_state import Deployment
from sagebox.box.control.retirement import RetirementController
from sagebox.box.control.rollouts import RolloutController
from sagebox.box.guardrails import DeploymentPolicy
from tests.sagebox.box.control_parts import instances, make_parts, running, serving, spec, variant


def canary(wait: int = 60, termination: int = 30, timeout: int | None = None) -> DeploymentPolicy:
    blue_green: dict[str, Any] = {
        "TrafficRoutingConfiguration": {
            "Type": "CANARY",
            "WaitIntervalInSeconds": wait,
            "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
        },
        "TerminationWaitInSeconds": termination,
    }
    if timeout is not None:
        blue_green["MaximumExecutionTimeoutInSeconds"] = timeout
    return DeploymentPolicy.from_config(
        {"BlueGreenUpdatePolicy": blue_green, "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "ep-5xx"}]}}
    )


class Update:
    """Blue serves v1 (two instances); green, v2's healthy fleet, is about to be handed over."""

    def __init__(self, tmp_path: Path, time_scale: float = 1.0) -> None:
        self.parts = make_parts(tmp_path, time_scale)
        self.firing: dict[str, str] = {}
        self.controller = RolloutController(
            self.parts.ctx, RetirementController(self.parts.ctx), lambda: dict(self.firing)
        )
        self.blue = serving(self.parts, "v1", count=2)
        self.green: Deployment = running(self.parts, "v2", count=2)
        endpoint = self.parts.endpoint()
        endpoint.pending_deployment_summary = {"EndpointConfigName": "v2"}
        endpoint.endpoint_status = "Updating"
        self.spec = spec("v2", "Updating", (variant(count=2),), update_pending=True)

    def at(self, now: float) -> None:
        self.parts.clock.now = now
        self.controller.advance()

    def share(self) -> float | None:
        new = self.parts.routes()["ep"].new_fleet
        return None if new is None else new.share


@pytest.fixture
def update(tmp_path: Path) -> Update:
    return Update(tmp_path)


def test_the_first_step_shifts_at_once_and_the_next_after_the_bake(update: Update) -> None:
    update.parts.clock.now = 100.0
    update.controller.begin(update.spec, update.green, canary())
    assert update.share() == 0.5
    [pending] = update.parts.endpoint().pending_deployment_summary["ProductionVariants"]
    assert pending["VariantStatus"][0]["Status"] == "Baking" and pending["CurrentInstanceCount"] == 2
    assert update.parts.fleet()["ep"]["update"]["status"] == "Baking"
    update.at(159.0)
    assert update.share() == 0.5
    update.at(160.0)
    assert update.share() == 1.0 and update.parts.endpoint().endpoint_status == "Updating"


def test_completion_switches_the_fleets_and_leaves_the_old_one_for_its_termination_wait(update: Update) -> None:
    parts = update.parts
    update.controller.begin(update.spec, update.green, canary())
    update.at(60.0)
    update.at(120.0)
    endpoint = parts.endpoint()
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v2")
    assert endpoint.pending_deployment_summary is None and endpoint.failure_reason is None
    assert parts.state.live["ep"] is update.green and parts.routes()["ep"].new_fleet is None
    assert [(r.deployment, r.stop_at) for r in parts.state.retiring] == [(update.blue, 150.0)]
    assert not any(i.stopped for i in instances(update.blue))
    assert parts.fleet()["ep"]["last_update"]["outcome"] == "completed"
    assert parts.fleet()["ep"]["retiring"][0]["stops_in_s"] == 30.0


def test_without_a_termination_wait_the_old_fleet_stops_as_the_update_completes(update: Update) -> None:
    update.controller.begin(update.spec, update.green, canary(termination=0))
    update.at(60.0)
    update.at(120.0)
    assert update.parts.state.retiring == [] and all(i.stopped for i in instances(update.blue))
    assert update.parts.background.names == ["retire-ep"]


def test_an_alarm_while_baking_rolls_back_at_once_and_the_new_fleet_stops_in_the_background(update: Update) -> None:
    parts = update.parts
    update.controller.begin(update.spec, update.green, canary())
    update.firing["other"] = "not this update's alarm"
    update.at(10.0)
    assert update.share() == 0.5
    update.firing["ep-5xx"] = "Threshold Crossed"
    parts.background.hold = True
    update.at(20.0)
    endpoint = parts.endpoint()
    assert endpoint.endpoint_status == "RollingBack"
    assert endpoint.failure_reason.startswith("Update to endpoint config v2 was rolled back: alarm ep-5xx went into")
    assert update.share() is None and parts.routes()["ep"].config == "v1"
    assert parts.background.names[-1] == "rollback-ep" and not any(i.stopped for i in instances(update.green))
    parts.background.run()
    assert all(i.stopped for i in instances(update.green)) and not any(i.stopped for i in instances(update.blue))
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v1")
    assert endpoint.failure_reason.startswith("Update to endpoint config v2 was rolled back")  # kept
    assert parts.fleet()["ep"]["rollbacks"] == 1 and parts.events[-1] == "wake"


def test_the_execution_timeout_counts_box_time_from_the_hand_over(tmp_path: Path) -> None:
    update = Update(tmp_path, time_scale=0.01)
    update.parts.clock.now = 5.0  # 500 box seconds went on starting the new fleet: they do not count
    update.controller.begin(update.spec, update.green, canary(wait=3600, timeout=600))
    update.at(10.99)  # 599 box seconds later
    assert update.parts.endpoint().endpoint_status == "Updating"
    update.at(11.01)
    assert update.parts.endpoint().endpoint_status == "InService"
    assert "MaximumExecutionTimeoutInSeconds (600 s)" in update.parts.endpoint().failure_reason


def test_an_update_whose_endpoint_changed_meanwhile_is_discarded(update: Update) -> None:
    update.parts.endpoint().pending_deployment_summary = {"EndpointConfigName": "v3"}
    update.controller.begin(update.spec, update.green, canary())
    assert update.parts.state.updates == {} and all(i.stopped for i in instances(update.green))


def test_an_update_that_completes_after_its_endpoint_is_gone_stops_its_new_fleet(update: Update) -> None:
    update.controller.begin(update.spec, update.green, canary())
    del update.parts.backend.endpoints["ep"]
    update.at(60.0)
    update.at(120.0)
    assert all(i.stopped for i in instances(update.green)) and update.parts.state.live["ep"] is update.blue
