"""Stand-ins for testing one controller of the control plane at a time (sagebox.box.control).

A `Context` over test_reconciler.py's stand-in SageMaker backend and launcher, an injected clock, fixed
DescribeEndpoint times, and background work that runs at once or is held until the test runs it: every assertion
follows from the order of calls, never from the wall clock.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box.control.box_time import BoxTime
from sagebox.box.control.context import Context
from sagebox.box.control.fleet_state import Deployment, FleetState, VariantFleet
from sagebox.box.control.records import Records, load_fleet
from sagebox.box.routes import Route, load_routes
from sagebox.box.specs import EndpointSpec, Serverless, VariantSpec
from tests.sagebox.box.test_reconciler import StandInBackend, StandInEndpoint, StandInInstance, StandInLauncher

UTC = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Background:
    """The controllers' `spawn`: runs work at once, or holds it while `hold` is set, until `run()`."""

    hold: bool = False
    names: list[str] = field(default_factory=list)
    held: list[Callable[[], None]] = field(default_factory=list)

    def __call__(self, fn: Callable[[], None], name: str) -> None:
        self.names.append(name)
        if self.hold:
            self.held.append(fn)
        else:
            fn()

    def run(self) -> None:
        self.hold = False
        while self.held:
            self.held.pop(0)()


@dataclass
class Parts:
    ctx: Context
    backend: StandInBackend
    launcher: StandInLauncher
    clock: Clock
    background: Background
    tmp_path: Path
    events: list[str]  # "settle" and "wake", in the order the controllers called them

    @property
    def state(self) -> FleetState:
        return self.ctx.state

    def routes(self) -> dict[str, Route]:
        return load_routes(self.tmp_path / "routes.json")

    def urls(self, endpoint: str = "ep") -> tuple[str, ...]:
        return self.routes()[endpoint].variants[0].urls

    def fleet(self) -> dict[str, Any]:
        return load_fleet(self.tmp_path)

    def endpoint(self, name: str = "ep") -> Any:
        return self.backend.endpoints[name]


def make_parts(tmp_path: Path, time_scale: float = 1.0, wall: Callable[[], float] | None = None) -> Parts:
    backend, launcher, clock, background = StandInBackend(), StandInLauncher(), Clock(), Background()
    events: list[str] = []
    state = FleetState()
    time = BoxTime(clock, time_scale)
    ctx = Context(
        state,
        Records(state, tmp_path, launcher.mode, time),
        time,
        lambda: backend,
        spawn=background,
        settle=lambda: events.append("settle"),
        wake=lambda: events.append("wake"),
        wall=wall or clock,
        utc=lambda: UTC,
    )
    return Parts(ctx, backend, launcher, clock, background, tmp_path, events)


def variant(
    name: str = "AllTraffic", count: int = 1, weight: float = 1.0, serverless: Serverless | None = None
) -> VariantSpec:
    return VariantSpec(
        name, f"model-{name}", "img:1", "s3://m/model.tar.gz", {}, "ml.c6i.xlarge", count, weight, 60, False, serverless
    )


def spec(
    config: str, status: str = "Creating", variants: tuple[VariantSpec, ...] = (), name: str = "ep", **extra: Any
) -> EndpointSpec:
    return EndpointSpec(name, config, status, variants or (variant(),), **extra)


def running(parts: Parts, config: str, count: int = 1, name: str = "ep", **fields: Any) -> Deployment:
    """A fleet of `count` stand-in instances of one variant, already started (not yet placed in the state)."""
    fleet = VariantFleet(
        variant(count=count),
        "img:1@sha256:0",
        parts.tmp_path / "endpoints" / name / config / "AllTraffic" / "model",
        desired=count,
        **fields,
    )
    fleet.instances = [parts.launcher.launch(name, fleet.spec, i, fleet.model_dir) for i in range(count)]
    return Deployment(name, config, [fleet], 0.0)


def serving(parts: Parts, config: str, count: int = 1, name: str = "ep", **fields: Any) -> Deployment:
    """A live fleet and its InService endpoint record, routed."""
    deployment = running(parts, config, count, name, **fields)
    parts.state.live[name] = deployment
    parts.backend.add(config)
    parts.backend.endpoints[name] = StandInEndpoint(name, config, "InService")
    parts.ctx.records.write_routes()
    return deployment


def instances(deployment: Deployment) -> list[StandInInstance]:
    return [i for f in deployment.variants for i in f.instances]  # type: ignore[misc]
