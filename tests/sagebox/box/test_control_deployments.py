"""The deployment controller alone: what it starts for a pass's endpoints, and how a deployment ends (InService,
Failed, an update handed to the rollouts, an old config serving on), on stand-ins with an injected clock."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sagebox.box.control.context import Observed
from sagebox.box.control.deployments import DeploymentController
from sagebox.box.control.retirement import RetirementController
from sagebox.box.control.rollouts import RolloutController
from sagebox.box.specs import SpecError
from tests.sagebox.box.control_parts import make_parts, serving, spec, variant
from tests.sagebox.box.test_reconciler import StandInEndpoint, healthy


class Deployer:
    def __init__(self, tmp_path: Path) -> None:
        self.parts = make_parts(tmp_path)
        self.fetched: list[tuple[str | None, Path]] = []
        self.seen_pending: list[Any] = []
        self.firing: dict[str, str] = {}
        rollouts = RolloutController(self.parts.ctx, RetirementController(self.parts.ctx), lambda: self.firing)
        self.controller = DeploymentController(
            self.parts.ctx, rollouts, self.parts.launcher, None, tmp_path, healthy, self.fetch
        )

    def fetch(self, s3: Any, url: str | None, dest: Path) -> Path:
        endpoint = self.parts.backend.endpoints.get("ep")
        # A copy: the controllers rewrite this same summary as the update goes on (Baking, ...), as on moto.
        self.seen_pending.append(copy.deepcopy(getattr(endpoint, "pending_deployment_summary", None)))
        self.fetched.append((url, dest))
        dest.mkdir(parents=True, exist_ok=True)
        return dest

    def reconcile(self, *specs: Any) -> None:
        state = self.parts.state
        with state.lock:
            self.controller.reconcile([Observed(s.name, s, state.live.get(s.name)) for s in specs])


@pytest.fixture
def deployer(tmp_path: Path) -> Deployer:
    return Deployer(tmp_path)


def test_a_new_endpoint_is_routed_before_it_turns_in_service(deployer: Deployer) -> None:
    parts = deployer.parts
    parts.backend.add("cfg")
    parts.backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    deployer.reconcile(spec("cfg", variants=(variant(count=2),)))
    endpoint = parts.endpoint()
    assert parts.background.names == ["deploy-ep"]
    assert endpoint.endpoint_status == "InService" and endpoint.last_modified_time is not None
    assert parts.urls() == tuple(i.url for i in parts.launcher.launched) and len(parts.launcher.launched) == 2
    assert [v["CurrentInstanceCount"] for v in endpoint.production_variants] == [2]
    assert parts.fleet()["ep"]["config"] == "cfg"
    assert parts.state.in_flight == {} and parts.events == ["settle", "wake"]
    assert deployer.fetched[0][1] == parts.tmp_path / "endpoints" / "ep" / "cfg" / "AllTraffic" / "model"


def test_a_deployment_under_way_is_not_started_twice(deployer: Deployer) -> None:
    parts = deployer.parts
    parts.backend.add("cfg")
    parts.backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    parts.background.hold = True
    deployer.reconcile(spec("cfg"))
    deployer.reconcile(spec("cfg"))
    assert parts.background.names == ["deploy-ep"] and parts.state.in_flight == {"ep": "cfg"}
    parts.background.run()
    assert parts.endpoint().endpoint_status == "InService" and parts.state.in_flight == {}


def test_a_capacity_change_is_not_a_deployment(deployer: Deployer) -> None:
    parts = deployer.parts
    serving(parts, "cfg")
    deployer.reconcile(spec("cfg", status="Updating"))  # same config, no UpdateEndpoint: the scaling controller's
    assert parts.background.names == []
    parts.background.hold = True  # only what this pass starts, not what the deployment then does
    deployer.reconcile(spec("cfg", status="Updating", update_pending=True))  # UpdateEndpoint to itself: a redeploy
    assert parts.background.names == ["deploy-ep"] and parts.state.in_flight == {"ep": "cfg"}


def test_a_redeploy_of_the_serving_config_gets_a_directory_of_its_own(deployer: Deployer) -> None:
    parts = deployer.parts
    serving(parts, "cfg")
    parts.endpoint().pending_deployment_summary = {"EndpointConfigName": "cfg"}
    parts.endpoint().endpoint_status = "Updating"
    deployer.reconcile(spec("cfg", status="Updating", update_pending=True))
    assert deployer.fetched[0][1] == parts.tmp_path / "endpoints" / "ep" / "cfg~2" / "AllTraffic" / "model"


def test_an_update_says_it_is_starting_the_new_fleet_then_hands_it_to_the_rollouts(deployer: Deployer) -> None:
    parts = deployer.parts
    blue = serving(parts, "v1")
    parts.backend.add("v2")
    endpoint = parts.endpoint()
    endpoint.pending_deployment_summary = {"EndpointConfigName": "v2"}
    endpoint.endpoint_status = "Updating"
    canary = {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": "CANARY",
                "WaitIntervalInSeconds": 60,
                "CanarySize": {"Type": "INSTANCE_COUNT", "Value": 1},
            }
        }
    }
    deployer.reconcile(
        spec("v2", status="Updating", variants=(variant(count=2),), update_pending=True, deployment=canary)
    )
    [status] = deployer.seen_pending[0]["ProductionVariants"][0]["VariantStatus"]
    assert (status["Status"], status["StatusMessage"]) == ("Creating", "starting the new fleet")
    update = parts.state.updates["ep"]
    assert update.green.config_name == "v2" and update.rollout.share == 0.5
    assert parts.state.live["ep"] is blue and parts.routes()["ep"].new_fleet is not None


def test_an_update_keeps_the_running_counts_when_asked_to(deployer: Deployer) -> None:
    parts = deployer.parts
    serving(parts, "v1", count=3)
    parts.backend.add("v2")
    parts.endpoint().pending_deployment_summary = {"EndpointConfigName": "v2"}
    parts.endpoint().endpoint_status = "Updating"
    deployer.reconcile(
        spec("v2", status="Updating", variants=(variant(count=1),), update_pending=True, retain_variant_properties=True)
    )
    assert parts.endpoint().endpoint_config_name == "v2"  # no DeploymentConfig: all at once
    assert len(parts.state.live["ep"].variants[0].instances) == 3


def test_a_failed_update_leaves_the_old_config_serving_and_is_recorded(deployer: Deployer) -> None:
    parts = deployer.parts
    blue = serving(parts, "v1")
    parts.backend.add("v2")
    parts.endpoint().pending_deployment_summary = {"EndpointConfigName": "v2"}
    parts.endpoint().endpoint_status = "Updating"
    parts.launcher.next_healthy = [False]
    deployer.reconcile(spec("v2", status="Updating", update_pending=True))
    endpoint = parts.endpoint()
    assert (endpoint.endpoint_status, endpoint.endpoint_config_name) == ("InService", "v1")
    assert endpoint.pending_deployment_summary is None
    assert "production variant AllTraffic did not pass the ping health check" in endpoint.failure_reason
    assert parts.launcher.launched[-1].stopped and parts.state.live["ep"] is blue
    assert parts.fleet()["ep"]["last_update"]["outcome"] == "failed"


def test_an_undeployable_spec_fails_a_new_endpoint_and_keeps_an_updated_one_serving(deployer: Deployer) -> None:
    parts = deployer.parts
    parts.backend.endpoints["new"] = StandInEndpoint("new", "cfg")
    serving(parts, "v1", name="old")
    parts.endpoint("old").endpoint_status = "Updating"
    parts.endpoint("old").pending_deployment_summary = {"EndpointConfigName": "v2"}
    state = parts.state
    with state.lock:
        deployer.controller.reconcile(
            [
                Observed("new", SpecError("model m names no container image"), None),
                Observed("old", SpecError("model m names no container image"), state.live["old"]),
            ]
        )
    assert parts.backend.endpoints["new"].endpoint_status == "Failed"
    old = parts.endpoint("old")
    assert (old.endpoint_status, old.endpoint_config_name, old.pending_deployment_summary) == ("InService", "v1", None)
    assert old.failure_reason == "model m names no container image"
    assert parts.events == ["settle", "settle"] and parts.background.names == []


def test_a_fleet_whose_endpoint_went_away_meanwhile_is_discarded(deployer: Deployer) -> None:
    parts = deployer.parts
    parts.backend.add("cfg")
    parts.backend.endpoints["ep"] = StandInEndpoint("ep", "cfg")
    parts.background.hold = True
    deployer.reconcile(spec("cfg"))
    del parts.backend.endpoints["ep"]
    parts.background.run()
    assert parts.launcher.launched[0].stopped and parts.state.live == {}
