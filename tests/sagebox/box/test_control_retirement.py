"""The retirement controller alone: a deleted endpoint leaves the routes before its fleets stop (in the background),
an endpoint gone without a word is found and stopped, and an old fleet stops once its termination wait (box time)
has passed; when the box exits every fleet stops; on stand-ins with an injected clock."""

from __future__ import annotations

from pathlib import Path

from sagebox.box.control.fleet_state import Retiring, Update
from sagebox.box.control.retirement import RetirementController
from sagebox.box.guardrails import DeploymentPolicy, Rollout
from tests.sagebox.box.control_parts import instances, make_parts, running, serving, spec


def test_a_deleted_endpoint_leaves_the_routes_at_once_and_its_fleets_stop_in_the_background(tmp_path: Path) -> None:
    parts = make_parts(tmp_path)
    controller = RetirementController(parts.ctx)
    live = serving(parts, "v1")
    old = running(parts, "v0")
    parts.state.retiring.append(Retiring(old, 1e9))
    serving(parts, "v1", name="other")
    parts.background.hold = True
    controller.deleted("ep")
    assert set(parts.routes()) == {"other"}
    assert parts.state.deleting == [live, old] and not any(i.stopped for i in instances(live) + instances(old))
    assert parts.state.retiring == [] and parts.background.names == ["retire-ep", "retire-ep"]
    parts.background.run()
    assert all(i.stopped for i in instances(live) + instances(old)) and parts.state.deleting == []
    assert set(parts.fleet()) == {"other"}


def test_deleting_an_unknown_endpoint_changes_nothing(tmp_path: Path) -> None:
    parts = make_parts(tmp_path)
    controller = RetirementController(parts.ctx)
    controller.deleted("never-deployed")
    assert parts.background.names == [] and not (tmp_path / "routes.json").exists()


def test_an_endpoint_gone_without_a_notification_is_taken_and_stopped(tmp_path: Path) -> None:
    parts = make_parts(tmp_path)
    controller = RetirementController(parts.ctx)
    gone = serving(parts, "v1", name="gone")
    kept = serving(parts, "v1", name="kept")
    with parts.state.lock:
        taken = controller.take_gone(["kept"])
    assert taken == [gone] and list(parts.state.live) == ["kept"]
    assert set(parts.routes()) == {"gone", "kept"}  # the routes change when they are retired, outside the lock
    controller.retire_taken(taken)
    assert set(parts.routes()) == {"kept"} and all(i.stopped for i in instances(gone))
    assert not any(i.stopped for i in instances(kept)) and parts.background.names == []  # stopped in the pass


def test_an_old_fleet_stops_once_its_termination_wait_has_passed_in_box_time(tmp_path: Path) -> None:
    parts = make_parts(tmp_path, time_scale=0.01)
    controller = RetirementController(parts.ctx)
    serving(parts, "v2")
    early, late = running(parts, "v1"), running(parts, "v0")
    parts.state.retiring += [Retiring(early, 300.0), Retiring(late, 600.0)]
    parts.clock.now = 2.99  # 299 box seconds
    controller.retire_due()
    assert not any(i.stopped for i in instances(early))
    parts.clock.now = 3.0
    controller.retire_due()
    assert all(i.stopped for i in instances(early)) and not any(i.stopped for i in instances(late))
    assert [r.deployment for r in parts.state.retiring] == [late]


def test_when_the_box_exits_every_fleet_stops_whatever_its_role(tmp_path: Path) -> None:
    parts = make_parts(tmp_path)
    controller = RetirementController(parts.ctx)
    live, other = serving(parts, "v1"), serving(parts, "v1", name="other")
    green, old, deleted = running(parts, "v2"), running(parts, "v0"), running(parts, "v1", name="gone")
    parts.state.updates["ep"] = Update(
        spec("v2", "Updating"), green, Rollout(DeploymentPolicy.from_config(None), 1, 0.0)
    )
    parts.state.retiring.append(Retiring(old, 1e9))
    parts.state.deleting.append(deleted)
    controller.stop_all()
    assert all(i.stopped for d in (live, other, green, old, deleted) for i in instances(d))
    assert parts.routes() == {} and parts.fleet() == {}
    state = parts.state
    assert state.stopping and (state.live, state.updates, state.retiring, state.deleting) == ({}, {}, [], [])
