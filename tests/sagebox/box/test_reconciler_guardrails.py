"""The control plane running updates under deployment guardrails and capacity changes, on the stand-in SageMaker
backend and instances of test_reconciler.py, with an injected clock and alarm states (no process, no sleep)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sagebox.box.embedded_aws.endpoint_updates import UpdateRequest
from sagebox.box.reconciler import Reconciler, load_fleet
from sagebox.box.routes import Route, load_routes
from tests.sagebox.box.test_reconciler import StandInBackend, StandInEndpoint, StandInLauncher, healthy


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Deferred:
    """Background work held until the test runs it (so in-between states can be seen)."""

    def __init__(self) -> None:
        self.held: list[Callable[[], None]] = []
        self.hold = False

    def __call__(self, fn: Callable[[], None], name: str) -> None:
        if self.hold:
            self.held.append(fn)
        else:
            fn()

    def run(self) -> None:
        while self.held:
            self.held.pop(0)()


class Box:
    def __init__(self, tmp_path: Path, time_scale: float = 1.0) -> None:
        self.backend, self.launcher, self.clock, self.spawn = StandInBackend(), StandInLauncher(), Clock(), Deferred()
        self.firing: dict[str, str] = {}
        self.settled = 0
        self.tmp_path = tmp_path

        def fetch(s3: Any, url: str | None, dest: Path) -> Path:
            dest.mkdir(parents=True, exist_ok=True)
            return dest

        def settle() -> None:
            self.settled += 1

        self.reconciler = Reconciler(
            lambda: self.backend,
            self.launcher,
            s3=None,
            state_dir=tmp_path,
            settle=settle,
            healthy=healthy,
            fetch=fetch,
            spawn=self.spawn,
            probe=lambda instance: True,
            clock=self.clock,
            time_scale=time_scale,
            alarms=lambda: dict(self.firing),
        )

    def add(self, config: str, instances: int = 1) -> None:
        self.backend.add(config, model_data=f"s3://m/{config}.tar.gz")
        self.backend.configs[config]["ProductionVariants"][0]["InitialInstanceCount"] = instances

    def endpoint(self, name: str = "ep") -> StandInEndpoint:
        return self.backend.endpoints[name]

    def at(self, now: float) -> None:
        self.clock.now = now
        self.reconciler.reconcile_once()

    def update(self, config: str, deployment: dict[str, Any] | None, retain: bool = False, name: str = "ep") -> None:
        """What the patched UpdateEndpoint leaves on the endpoint."""
        endpoint: Any = self.endpoint(name)
        endpoint.pending_deployment_summary = {"EndpointConfigName": config}
        endpoint.last_deployment_config = deployment
        endpoint.box_update = UpdateRequest(retain_variant_properties=retain)
        endpoint.endpoint_status = "Updating"
        endpoint.failure_reason = None

    def route(self, name: str = "ep") -> Route:
        return load_routes(self.tmp_path / "routes.json")[name]


def canary(wait: int = 60, termination: int = 30, alarms: tuple[str, ...] = ("ep-5xx",)) -> dict[str, Any]:
    return {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "WaitIntervalInSeconds": wait,
                "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
            },
            "TerminationWaitInSeconds": termination,
        },
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": a} for a in alarms]},
    }


@pytest.fixture
def box(tmp_path: Path) -> Box:
    made = Box(tmp_path)
    made.add("v1", instances=2)
    made.add("v2", instances=2)
    made.backend.endpoints["ep"] = StandInEndpoint("ep", "v1")
    made.at(0.0)
    assert made.endpoint().endpoint_status == "InService"
    return made


def test_a_canary_update_shifts_traffic_step_by_step_and_the_old_fleet_stops_after_the_termination_wait(
    box: Box,
) -> None:
    blue = list(box.launcher.launched)
    box.update("v2", canary())
    box.at(10.0)  # the new fleet starts and is healthy: the canary step begins
    green = box.launcher.launched[2:]
    endpoint: Any = box.endpoint()
    assert endpoint.endpoint_status == "Updating" and endpoint.endpoint_config_name == "v1"
    route = box.route()
    assert route.config == "v1" and route.new_fleet is not None and route.new_fleet.config == "v2"
    assert route.new_fleet.share == 0.5 and set(route.new_fleet.variants[0].urls) == {g.url for g in green}
    [pending] = endpoint.pending_deployment_summary["ProductionVariants"]
    assert pending["VariantStatus"][0]["Status"] == "Baking" and pending["CurrentInstanceCount"] == 2
    assert "step 1 of 2: 50% of traffic" in pending["VariantStatus"][0]["StatusMessage"]
    assert load_fleet(box.tmp_path)["ep"]["update"]["share"] == 0.5

    box.at(69.0)
    route = box.route()
    assert route.new_fleet is not None and route.new_fleet.share == 0.5  # still baking the canary
    box.at(70.0)
    route = box.route()
    assert route.new_fleet is not None and route.new_fleet.share == 1.0  # the rest shifts; the final bake starts
    assert endpoint.endpoint_status == "Updating"

    box.at(130.0)  # the final bake passed: the new fleet serves alone
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v2")
    assert endpoint.pending_deployment_summary is None and endpoint.failure_reason is None
    route = box.route()
    assert route.config == "v2" and route.new_fleet is None
    assert not any(b.stopped for b in blue)  # the termination wait
    assert load_fleet(box.tmp_path)["ep"]["retiring"][0]["config"] == "v1"
    box.at(159.0)
    assert not any(b.stopped for b in blue)
    box.at(160.0)
    assert all(b.stopped for b in blue) and not any(g.stopped for g in green)
    assert load_fleet(box.tmp_path)["ep"]["last_update"]["outcome"] == "completed"


def test_an_alarm_while_baking_rolls_back_to_the_old_fleet_and_says_why(box: Box) -> None:
    blue = list(box.launcher.launched)
    box.update("v2", canary())
    box.at(10.0)
    green = box.launcher.launched[2:]
    box.firing["other-alarm"] = "not a rollback alarm of this update"
    box.at(20.0)
    assert box.endpoint().endpoint_status == "Updating"
    box.firing["ep-5xx"] = "Threshold Crossed: 1 out of the last 1 datapoints [4]"
    box.spawn.hold = True
    box.at(30.0)
    endpoint: Any = box.endpoint()
    assert endpoint.endpoint_status == "RollingBack"
    assert "Update to endpoint config v2 was rolled back: alarm ep-5xx went into ALARM" in endpoint.failure_reason
    assert box.route().new_fleet is None and box.route().config == "v1"  # traffic back at once
    assert not any(g.stopped for g in green)  # the new fleet stops in the background
    box.spawn.run()
    assert all(g.stopped for g in green) and not any(b.stopped for b in blue)
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v1")
    assert endpoint.pending_deployment_summary is None
    fleet = load_fleet(box.tmp_path)["ep"]
    assert fleet["rollbacks"] == 1 and fleet["last_update"]["outcome"] == "rolled back"
    assert box.settled >= 2  # CloudFormation hears of RollingBack and of InService


def test_the_time_scale_shortens_the_bake(tmp_path: Path) -> None:
    box = Box(tmp_path, time_scale=0.01)
    box.add("v1", instances=2)
    box.add("v2", instances=2)
    box.backend.endpoints["ep"] = StandInEndpoint("ep", "v1")
    box.at(0.0)
    box.update("v2", canary(wait=300, termination=0))
    box.at(1.0)
    assert box.route().new_fleet is not None and box.route().new_fleet.share == 0.5  # type: ignore[union-attr]
    box.at(3.9)  # 290 box seconds later
    assert box.route().new_fleet.share == 0.5  # type: ignore[union-attr]
    box.at(4.0)  # 300 box seconds: the canary bake is over
    assert box.route().new_fleet.share == 1.0  # type: ignore[union-attr]
    box.at(7.0)
    assert box.endpoint().endpoint_status == "InService" and box.endpoint().endpoint_config_name == "v2"


def test_a_capacity_change_starts_and_stops_instances_and_describes_the_count(box: Box) -> None:
    endpoint: Any = box.endpoint()
    endpoint.production_variants[0]["DesiredInstanceCount"] = 3
    endpoint.endpoint_status = "Updating"
    box.at(5.0)
    assert endpoint.endpoint_status == "InService"
    assert endpoint.production_variants[0]["CurrentInstanceCount"] == 3
    assert len(box.route().variants[0].urls) == 3
    endpoint.production_variants[0]["DesiredInstanceCount"] = 1
    endpoint.production_variants[0]["DesiredWeight"] = 0.5
    endpoint.endpoint_status = "Updating"
    box.at(6.0)
    assert endpoint.production_variants[0]["CurrentInstanceCount"] == 1
    assert endpoint.production_variants[0]["CurrentWeight"] == 0.5
    assert box.route().variants[0].urls == (box.launcher.launched[0].url,)
    assert [i.stopped for i in box.launcher.launched] == [False, True, True]
    scaling = load_fleet(box.tmp_path)["ep"]["scaling"]
    assert [(s["from"], s["to"]) for s in scaling] == [(2, 3), (3, 1)]


def test_an_update_that_retains_variant_properties_keeps_the_scaled_count(box: Box) -> None:
    endpoint: Any = box.endpoint()
    endpoint.production_variants[0]["DesiredInstanceCount"] = 3
    endpoint.endpoint_status = "Updating"
    box.at(5.0)
    box.update("v2", None, retain=True)
    box.at(6.0)  # no DeploymentConfig: all at once, no bake
    assert endpoint.endpoint_config_name == "v2" and endpoint.endpoint_status == "InService"
    assert endpoint.production_variants[0]["CurrentInstanceCount"] == 3  # not the config's 2
    assert len(box.route().variants[0].urls) == 3


def test_deleting_an_endpoint_mid_update_stops_both_fleets(box: Box) -> None:
    box.update("v2", canary())
    box.at(10.0)
    del box.backend.endpoints["ep"]
    box.reconciler.notify("deleted", "ep")
    assert all(i.stopped for i in box.launcher.launched) and len(box.launcher.launched) == 4
    assert load_routes(box.tmp_path / "routes.json") == {}
