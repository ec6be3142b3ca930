"""A serverless variant's cold start from the gateway's side (sagebox.box.gateway.cold_starts): a request to a variant
scaled to zero says it waits (in the activity file the control plane reads), and is let through when the route table
shows a healthy instance; it gives up at the variant's start-up timeout, or when the endpoint goes away. The timer
is a stand-in that moves one second per reading, so timeouts are exact and no test waits for a clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sagebox.box import serverless
from sagebox.box.gateway.cold_starts import ColdStarts
from sagebox.box.routes import Route, RouteTable, VariantRoute, save_routes

COLD = VariantRoute("sv", 1.0, (), max_concurrency=2, cold=True, startup_timeout_s=5.0)
WARM = VariantRoute("sv", 1.0, ("http://warm",), max_concurrency=2)


def ticking() -> Callable[[], float]:
    """A timer that moves on one second each time it is read."""
    ticks = iter(range(1_000_000))
    return lambda: float(next(ticks))


def parts(tmp_path: Path, variant: VariantRoute, timer: Callable[[], float] | None = None) -> tuple[Path, ColdStarts]:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"ep": Route("ep", (variant,))})
    return routes, ColdStarts(RouteTable(routes), tmp_path, now=lambda: 50.0, timer=timer or ticking(), poll_s=0)


def test_a_warm_variant_is_answered_at_once_without_telling_the_control_plane(tmp_path: Path) -> None:
    _, cold = parts(tmp_path, WARM)
    assert asyncio.run(cold.warm_variant("ep", WARM)) == WARM
    assert not (tmp_path / serverless.ACTIVITY_FILE).exists()


def test_a_request_to_a_cold_variant_says_it_waits_and_goes_on_once_an_instance_serves(tmp_path: Path) -> None:
    routes, cold = parts(tmp_path, COLD, timer=lambda: 0.0)  # time stands still: only the route table decides

    async def main() -> None:
        waiting = asyncio.ensure_future(cold.warm_variant("ep", COLD))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiting.done()
        # The control plane reads that a request waits for "sv", and starts an instance.
        assert serverless.read_activity(tmp_path)[("ep", "sv")].waiting == 1
        save_routes(routes, {"ep": Route("ep", (WARM,))})
        assert await waiting == WARM

    asyncio.run(main())
    assert cold.activity.get(("ep", "sv")).waiting == 0  # no longer waiting: the next write says so


def test_a_cold_start_past_the_start_up_timeout_gives_up(tmp_path: Path) -> None:
    _, cold = parts(tmp_path, COLD)
    assert asyncio.run(cold.warm_variant("ep", COLD)) is None  # five ticks of the timer, then no more waiting
    assert cold.activity.get(("ep", "sv")).waiting == 0


def test_a_request_stops_waiting_when_its_endpoint_or_variant_goes_away(tmp_path: Path) -> None:
    routes, cold = parts(tmp_path, COLD)
    save_routes(routes, {})
    assert asyncio.run(cold.warm_variant("ep", COLD)) is None
    save_routes(routes, {"ep": Route("ep", (VariantRoute("other", 1.0, ("http://o",)),))})
    assert asyncio.run(cold.warm_variant("ep", COLD)) is None


def test_an_instance_that_failed_to_answer_is_not_taken_for_a_warm_one(tmp_path: Path) -> None:
    routes, cold = parts(tmp_path, WARM)
    # The route still lists the instance that just refused the call: it is not ready, so the request waits it out.
    assert asyncio.run(cold.warm_variant("ep", WARM, failed="http://warm")) is None
    fresh = VariantRoute("sv", 1.0, ("http://fresh",), max_concurrency=2)
    save_routes(routes, {"ep": Route("ep", (fresh,))})
    assert asyncio.run(cold.warm_variant("ep", WARM, failed="http://warm")) == fresh


def test_admission_stops_at_max_concurrency_and_a_release_makes_room(tmp_path: Path) -> None:
    _, cold = parts(tmp_path, WARM)
    key = ("ep", "sv")
    assert cold.admit(key, 2) and cold.admit(key, 2)
    assert not cold.admit(key, 2)
    cold.release(key)
    assert cold.admit(key, 2)
    cold.write_activity()
    assert serverless.read_activity(tmp_path)[key] == serverless.Activity(50.0, 2, 0)
