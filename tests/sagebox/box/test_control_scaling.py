"""The scaling controller alone: capacity changes (UpdateEndpointWeightsAndCapacities, which target tracking calls)
start or stop instances of the serving fleet, and a serverless variant scales to zero after its idle period in box
time and cold-starts when a request waits; on stand-ins with an injected clock (no process, no sleep)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from sagebox.box import serverless
from sagebox.box.control.context import Observed
from sagebox.box.control.fleet_state import Deployment
from sagebox.box.control.scaling import ScalingController
from sagebox.box.specs import Capacity, EndpointSpec, Serverless
from tests.sagebox.box.control_parts import Clock, instances, make_parts, serving, spec, variant
from tests.sagebox.box.test_reconciler import StandInInstance


class Scaler:
    def __init__(self, tmp_path: Path, time_scale: float = 1.0) -> None:
        self.wall = Clock(1_000_000.0)  # epoch seconds, the clock of the gateway's activity file
        self.parts = make_parts(tmp_path, time_scale, wall=self.wall)
        self.start_takes_s = 0.0  # what an instance takes to become healthy, on the injected clock
        self.controller = ScalingController(
            self.parts.ctx, self.parts.launcher, self.healthy, tmp_path, serverless_idle_s=600.0
        )

    def healthy(self, instance: Any, timeout_s: float) -> float:
        self.parts.clock.now += self.start_takes_s
        if not instance.healthy:
            raise RuntimeError("the container exited: out of memory")
        return self.start_takes_s

    def capacity(self, *wanted: Capacity, **extra: Any) -> EndpointSpec:
        """What the embedded SageMaker asks of "ep" after UpdateEndpointWeightsAndCapacities on config v1."""
        self.parts.endpoint().endpoint_status = "Updating"
        return spec("v1", "Updating", desired=wanted, **extra)

    def reconcile(self, asked: EndpointSpec) -> None:
        state = self.parts.state
        with state.lock:
            self.controller.reconcile([Observed(asked.name, asked, state.live.get(asked.name))])


@pytest.fixture
def scaler(tmp_path: Path) -> Scaler:
    return Scaler(tmp_path)


def test_scaling_out_starts_instances_and_the_endpoint_serves_again_once_they_are_healthy(scaler: Scaler) -> None:
    parts = scaler.parts
    live = serving(parts, "v1")
    scaler.reconcile(scaler.capacity(Capacity("AllTraffic", 3, 2.0)))
    fleet = live.variants[0]
    assert parts.background.names == ["resize-ep"] and len(fleet.instances) == 3
    assert (fleet.desired, fleet.weight) == (3, 2.0)
    assert parts.urls() == tuple(i.url for i in parts.launcher.launched)
    endpoint = parts.endpoint()
    assert (endpoint.endpoint_status, endpoint.failure_reason) == ("InService", None)
    [summary] = endpoint.production_variants
    assert (summary["CurrentInstanceCount"], summary["DesiredInstanceCount"], summary["CurrentWeight"]) == (3, 3, 2.0)
    [event] = parts.fleet()["ep"]["scaling"]
    assert (event["variant"], event["from"], event["to"]) == ("AllTraffic", 1, 3)
    assert parts.state.resizing == set() and parts.events == ["settle", "wake"]


def test_scaling_in_takes_instances_out_of_the_routes_before_they_stop(
    scaler: Scaler, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = scaler.parts
    live = serving(parts, "v1", count=3)
    kept, *leaving = instances(live)
    routed_at_stop: list[tuple[str, ...]] = []

    def stop_seeing_the_routes(instance: StandInInstance) -> None:
        routed_at_stop.append(parts.urls())
        instance.stopped = True

    for instance in leaving:
        monkeypatch.setattr(instance, "stop", functools.partial(stop_seeing_the_routes, instance))
    scaler.reconcile(scaler.capacity(Capacity("AllTraffic", 1, None)))
    assert routed_at_stop == [(kept.url,), (kept.url,)] and all(i.stopped for i in leaving)
    assert instances(live) == [kept] and live.variants[0].desired == 1
    assert parts.endpoint().endpoint_status == "InService"


def test_a_failed_start_leaves_the_variant_at_its_previous_count_and_says_why(scaler: Scaler) -> None:
    parts = scaler.parts
    live = serving(parts, "v1")
    parts.launcher.next_healthy = [True, False]
    scaler.reconcile(scaler.capacity(Capacity("AllTraffic", 3, None)))
    started = parts.launcher.launched[1:]
    assert len(started) == 2 and all(i.stopped for i in started)  # the healthy one too: all or nothing
    assert len(live.variants[0].instances) == 1 and live.variants[0].desired == 1
    endpoint = parts.endpoint()
    assert endpoint.endpoint_status == "InService"
    assert endpoint.failure_reason.startswith("Failed to scale variant AllTraffic to 3 instance(s): the container")
    assert parts.fleet()["ep"]["scaling"] == []


def test_a_weight_alone_starts_nothing(scaler: Scaler) -> None:
    live = serving(scaler.parts, "v1", count=2)
    scaler.reconcile(scaler.capacity(Capacity("AllTraffic", None, 0.5), Capacity("Elsewhere", 4, None)))
    fleet = live.variants[0]
    assert (len(scaler.parts.launcher.launched), fleet.weight, fleet.desired) == (2, 0.5, 2)
    assert scaler.parts.routes()["ep"].variants[0].weight == 0.5


def test_only_a_capacity_change_with_nothing_else_under_way_is_started(scaler: Scaler) -> None:
    parts = scaler.parts
    serving(parts, "v1")
    parts.background.hold = True
    wanted = Capacity("AllTraffic", 2, None)
    scaler.reconcile(scaler.capacity(wanted, update_pending=True))  # UpdateEndpoint: a deployment, not scaling
    scaler.reconcile(spec("v2", "Updating", desired=(wanted,)))  # another config: a deployment too
    parts.state.in_flight["ep"] = "v1"
    scaler.reconcile(scaler.capacity(wanted))  # a deployment of the endpoint is under way
    assert parts.background.names == []
    del parts.state.in_flight["ep"]
    scaler.reconcile(scaler.capacity(wanted))
    scaler.reconcile(scaler.capacity(wanted))  # the first is under way: not twice
    assert parts.background.names == ["resize-ep"] and parts.state.resizing == {"ep"}
    parts.background.run()
    assert parts.state.resizing == set() and len(parts.launcher.launched) == 2


def test_a_resize_for_an_endpoint_deleted_meanwhile_does_nothing(scaler: Scaler) -> None:
    parts = scaler.parts
    serving(parts, "v1")
    parts.background.hold = True
    scaler.reconcile(scaler.capacity(Capacity("AllTraffic", 2, None)))
    del parts.state.live["ep"]
    parts.background.run()
    assert len(parts.launcher.launched) == 1 and parts.state.resizing == set() and parts.events == ["settle", "wake"]


# --- serverless ---------------------------------------------------------------------------------------------------


def serverless_fleet(scaler: Scaler) -> Deployment:
    deployment = serving(scaler.parts, "v1")
    fleet = deployment.variants[0]
    fleet.spec = variant(serverless=Serverless(2048, 3))
    fleet.warm_since = scaler.wall.now
    return deployment


def report(scaler: Scaler, **activity: Any) -> None:
    """What the gateway writes of the variant's requests."""
    entry = serverless.Activity(**activity)
    serverless.write_activity(scaler.parts.tmp_path, {("ep", "AllTraffic"): entry})


def test_an_idle_serverless_variant_scales_to_zero_after_its_idle_period_in_box_time(tmp_path: Path) -> None:
    scaler = Scaler(tmp_path, time_scale=0.01)  # 600 box seconds idle: 6 real seconds
    parts = scaler.parts
    deployment = serverless_fleet(scaler)
    [instance] = instances(deployment)
    started = scaler.wall.now
    report(scaler, last_request_at=started + 2.0)
    scaler.wall.now = started + 7.9
    scaler.controller.scale_serverless()
    assert not instance.stopped  # 5.9 s since the last request
    scaler.wall.now = started + 8.1
    parts.background.hold = True
    scaler.controller.scale_serverless()
    [route] = parts.routes()["ep"].variants
    assert (route.cold, route.urls) == (True, ()) and not instance.stopped  # out of the routes first
    assert parts.background.names == ["scale-to-zero-ep"]
    parts.background.run()
    assert instance.stopped and deployment.variants[0].instances == []
    described = parts.fleet()["ep"]["variants"][0]["serverless"]
    assert (described["state"], described["scaled_to_zero"]) == ("cold", 1)


def test_a_variant_with_requests_in_flight_is_not_idle(scaler: Scaler) -> None:
    [instance] = instances(serverless_fleet(scaler))
    report(scaler, last_request_at=0.0, in_flight=1)
    scaler.wall.now += 3600.0
    scaler.controller.scale_serverless()
    assert not instance.stopped


def cold(scaler: Scaler) -> Deployment:
    deployment = serverless_fleet(scaler)
    fleet = deployment.variants[0]
    fleet.instances, fleet.cold = [], True
    scaler.parts.ctx.records.write_routes()
    return deployment


def test_a_waiting_request_cold_starts_one_instance_and_the_start_is_timed_on_the_clock(scaler: Scaler) -> None:
    parts = scaler.parts
    fleet = cold(scaler).variants[0]
    scaler.controller.scale_serverless()
    assert parts.launcher.launched[1:] == []  # cold, and nobody waits
    report(scaler, last_request_at=scaler.wall.now, in_flight=1, waiting=1)
    scaler.start_takes_s = 2.5
    parts.background.hold = True
    scaler.controller.scale_serverless()
    scaler.controller.scale_serverless()  # the start is under way: the stale "waiting" starts no second one
    assert parts.background.names == ["cold-start-ep"] and fleet.state() == "starting"
    parts.background.run()
    [started] = parts.launcher.launched[1:]
    assert fleet.instances == [started] and fleet.state() == "warm" and fleet.warm_since == scaler.wall.now
    assert (fleet.cold_starts, fleet.last_cold_start_s) == (1, 2.5)
    [route] = parts.routes()["ep"].variants
    assert (route.cold, route.urls) == (False, (started.url,))


def test_a_failed_cold_start_leaves_the_variant_cold_to_be_started_again(scaler: Scaler) -> None:
    parts = scaler.parts
    fleet = cold(scaler).variants[0]
    report(scaler, last_request_at=scaler.wall.now, waiting=1)
    parts.launcher.next_healthy = [False]
    scaler.controller.scale_serverless()
    assert parts.launcher.launched[1].stopped and fleet.instances == [] and fleet.state() == "cold"
    scaler.controller.scale_serverless()  # the request still waits: another try
    assert fleet.instances == [parts.launcher.launched[2]] and fleet.cold_starts == 1


def test_a_cold_start_that_ends_after_the_endpoint_was_replaced_is_stopped(scaler: Scaler) -> None:
    parts = scaler.parts
    deployment = cold(scaler)
    report(scaler, last_request_at=scaler.wall.now, waiting=1)
    parts.background.hold = True
    scaler.controller.scale_serverless()
    del parts.state.live["ep"]
    parts.background.run()
    [started] = parts.launcher.launched[1:]
    assert started.stopped and deployment.variants[0].instances == [] and deployment.variants[0].state() == "cold"
