"""The health controller alone: a dead instance is replaced at once, a live one that fails `unhealthy_after` health
checks in a row (made every `probe_every_s` on the injected clock) is stopped and replaced, a check that passes
resets the count; which fleets of an endpoint it looks after; on stand-ins (no process, no HTTP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sagebox.box.control.context import Observed
from sagebox.box.control.fleet_state import Deployment, Update
from sagebox.box.control.health import HealthController
from sagebox.box.guardrails import DeploymentPolicy, Rollout
from sagebox.box.specs import SpecError
from tests.sagebox.box.control_parts import Parts, instances, make_parts, running, serving, spec
from tests.sagebox.box.test_reconciler import StandInInstance


class Healer:
    def __init__(self, tmp_path: Path) -> None:
        self.parts = make_parts(tmp_path)
        self.awaited: list[Any] = []
        self.controller = HealthController(
            self.parts.ctx,
            self.parts.launcher,
            self.healthy,
            lambda instance: bool(getattr(instance, "answering", True)),
            probe_every_s=5.0,
            unhealthy_after=3,
        )

    def healthy(self, instance: Any, timeout_s: float) -> float:
        self.awaited.append(instance)
        if not instance.healthy:
            raise RuntimeError("the replacement did not answer /ping")
        return 0.0

    def at(self, now: float, status: str = "InService", config: str = "v1") -> None:
        """One pass's health step for endpoint "ep" at `now` (clock seconds)."""
        self.parts.clock.now = now
        state = self.parts.state
        with state.lock:
            self.controller.start_pass()
            self.controller.reconcile([Observed("ep", spec(config, status), state.live.get("ep"))])


@pytest.fixture
def healer(tmp_path: Path) -> Healer:
    return Healer(tmp_path)


def first(deployment: Deployment) -> StandInInstance:
    return instances(deployment)[0]


def test_a_dead_instance_is_replaced_at_once_in_its_place(healer: Healer) -> None:
    parts = healer.parts
    live = serving(parts, "v1", count=2)
    dead, kept = instances(live)
    dead.running = False
    parts.background.hold = True
    healer.at(1.0)
    [replacement] = parts.launcher.launched[2:]
    assert instances(live) == [replacement, kept] and live.variants[0].restarts == 1
    assert parts.urls() == (replacement.url, kept.url)  # the dead one takes no more traffic
    assert parts.background.names == ["replace-ep"] and healer.awaited == []  # waited for in the background
    parts.background.run()
    assert healer.awaited == [replacement] and parts.fleet()["ep"]["variants"][0]["restarts"] == 1


def test_a_replacement_that_does_not_become_healthy_is_still_recorded(healer: Healer) -> None:
    parts = healer.parts
    live = serving(parts, "v1")
    first(live).running = False
    parts.launcher.next_healthy = [False]
    healer.at(1.0)  # the waiting fails quietly: the next pass finds the replacement and judges it
    assert parts.fleet()["ep"]["variants"][0]["instances"][0]["url"] == parts.launcher.launched[1].url


def test_three_failed_checks_in_a_row_replace_an_instance_and_passes_between_checks_count_none(
    healer: Healer,
) -> None:
    parts = healer.parts
    live = serving(parts, "v1")
    sick = first(live)
    sick.answering = False
    launched = []
    for tick in range(0, 11):  # a pass every second, a check every 5 s: at 0, 5 and 10
        healer.at(float(tick))
        launched.append(len(parts.launcher.launched))
    assert launched[:10] == [1] * 10 and not any(i.stopped for i in parts.launcher.launched[1:])
    assert launched[10] == 2 and sick.stopped and live.variants[0].restarts == 1
    assert parts.urls() == (parts.launcher.launched[1].url,)


def test_a_check_that_passes_resets_the_count(healer: Healer) -> None:
    parts = healer.parts
    flaky = first(serving(parts, "v1"))
    for tick, answering in ((0.0, False), (5.0, False), (10.0, True), (15.0, False), (20.0, False)):
        flaky.answering = answering
        healer.at(tick)
    assert not flaky.stopped and len(parts.launcher.launched) == 1
    healer.at(25.0)  # now three in a row
    assert flaky.stopped and len(parts.launcher.launched) == 2


def test_an_endpoint_still_being_created_is_not_healed(healer: Healer) -> None:
    parts = healer.parts
    live = serving(parts, "v1")
    first(live).running = False
    healer.at(1.0, status="Creating")  # CreateEndpoint again under the same name: its deployment decides
    assert len(parts.launcher.launched) == 1 and live.variants[0].restarts == 0
    healer.at(2.0, status="Updating")
    assert len(parts.launcher.launched) == 2


def test_an_endpoint_whose_spec_cannot_be_read_keeps_its_serving_fleet_healed(healer: Healer) -> None:
    parts = healer.parts
    live = serving(parts, "v1")
    first(live).running = False
    with parts.state.lock:
        healer.controller.start_pass()
        healer.controller.reconcile([Observed("ep", SpecError("config deleted"), live)])
    assert len(parts.launcher.launched) == 2 and live.variants[0].restarts == 1


def with_update(parts: Parts) -> Deployment:
    green = running(parts, "v2")
    policy = DeploymentPolicy.from_config(None)
    parts.state.updates["ep"] = Update(spec("v2", "Updating"), green, Rollout(policy, 1, requested_at=0.0))
    return green


def test_an_updates_new_fleet_is_healed_beside_the_serving_one(healer: Healer) -> None:
    parts = healer.parts
    live = serving(parts, "v1")
    green = with_update(parts)
    first(live).running = False
    first(green).running = False
    healer.at(1.0, status="Updating", config="v2")
    assert live.variants[0].restarts == 1 and green.variants[0].restarts == 1
    assert parts.background.names == ["replace-ep", "replace-ep"]


def test_every_fleet_of_a_pass_is_health_checked_not_only_the_first(healer: Healer) -> None:
    """Two endpoints and an update's new fleet, each with an instance that hangs (alive, /ping failing): all three
    are checked in the same passes and replaced after three failed checks (the first fleet of a pass alone was, when
    the decision to check was taken per fleet)."""
    parts = healer.parts
    live = serving(parts, "v1")
    green = with_update(parts)
    other = serving(parts, "o1", name="other")
    hung = [first(live), first(green), first(other)]
    for instance in hung:
        instance.answering = False
    for tick in (0.0, 5.0, 10.0):
        parts.clock.now = tick
        with parts.state.lock:
            healer.controller.start_pass()
            healer.controller.reconcile([Observed("ep", spec("v2", "Updating"), live)])
            healer.controller.reconcile([Observed("other", spec("o1", "InService", name="other"), other)])
    assert all(instance.stopped for instance in hung)
    assert [d.variants[0].restarts for d in (live, green, other)] == [1, 1, 1]
