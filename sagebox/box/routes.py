"""The local runtime's route table: endpoint name -> its variants -> the instances that answer them.

The control plane writes it (atomically) whenever an endpoint starts serving, changes or stops; the runtime
gateway re-reads it when the file changes. Only endpoints that serve are in it. During a blue/green update an
endpoint has two fleets: the one that serves (`variants`, of endpoint config `config`) and the new one
(`new_fleet`), which takes `new_fleet.share` of the traffic as the deployment policy shifts it.

An endpoint may also have shadow variants (`shadows`: each gets a copy of the sampled share of requests its
`weight` says, 0-1), serverless variants (`max_concurrency` set; `cold` when scaled to zero: no URL until the
control plane has started an instance again), an asynchronous config (`async_config`, AsyncInferenceConfig as
DescribeEndpoint gives it) and the data capture config (`capture`, DataCaptureConfig as the endpoint config gives it).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagebox.box.data_capture import CaptureConfig


@dataclass(frozen=True)
class VariantRoute:
    name: str
    weight: float  # a production variant's weight; a shadow's sampled share of production's requests (0-1)
    urls: tuple[str, ...]  # base URLs of the variant's healthy instances, e.g. http://127.0.0.1:8123
    log_path: str = ""
    max_concurrency: int | None = None  # serverless: invocations served at once; more are throttled
    cold: bool = False  # serverless, scaled to zero: a request waits while the control plane starts an instance
    startup_timeout_s: float = 600.0  # how long a request waits for a cold start


@dataclass(frozen=True)
class FleetRoute:
    """A blue/green update's new fleet: its endpoint config, its share of the endpoint's traffic, its variants."""

    config: str
    share: float
    variants: tuple[VariantRoute, ...]


@dataclass(frozen=True)
class Route:
    endpoint: str
    variants: tuple[VariantRoute, ...]
    config: str = ""  # the endpoint config of `variants` ("" when unknown)
    new_fleet: FleetRoute | None = None
    shadows: tuple[VariantRoute, ...] = ()
    async_config: dict[str, Any] | None = None
    capture: dict[str, Any] | None = None  # DataCaptureConfig of the serving config

    def variant(self, name: str) -> VariantRoute | None:
        return next((v for v in self.variants if v.name == name), None)

    @functools.cached_property
    def capture_config(self) -> CaptureConfig | None:
        """`capture`, parsed once per loaded route (the gateway reads it on every invocation)."""
        return CaptureConfig.of(self.capture) if self.capture else None

    def fleets(self) -> list[tuple[str, float, tuple[VariantRoute, ...]]]:
        """(config, share of traffic, variants) of each fleet that takes traffic."""
        new = self.new_fleet
        if new is None or new.share <= 0:
            return [(self.config, 1.0, self.variants)]
        if new.share >= 1:
            return [(new.config, 1.0, new.variants)]
        return [(self.config, 1.0 - new.share, self.variants), (new.config, new.share, new.variants)]


def _variants(raw: list[dict[str, Any]]) -> tuple[VariantRoute, ...]:
    return tuple(
        VariantRoute(
            v["name"],
            float(v["weight"]),
            tuple(v["urls"]),
            v.get("log_path", ""),
            int(v["max_concurrency"]) if v.get("max_concurrency") else None,
            bool(v.get("cold", False)),
            float(v.get("startup_timeout_s", 600.0)),
        )
        for v in raw
    )


def load_routes(path: Path) -> dict[str, Route]:
    if not path.is_file():
        return {}
    raw = json.loads(path.read_text())
    routes = {}
    for name, entry in raw.items():
        new = entry.get("new_fleet")
        routes[name] = Route(
            entry["endpoint"],
            _variants(entry["variants"]),
            entry.get("config", ""),
            FleetRoute(new["config"], float(new["share"]), _variants(new["variants"])) if new else None,
            _variants(entry.get("shadows", [])),
            entry.get("async_config"),
            entry.get("capture"),
        )
    return routes


def save_routes(path: Path, routes: dict[str, Route]) -> None:
    """Write the table atomically, so a reader never sees half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump({name: asdict(route) for name, route in sorted(routes.items())}, fh, indent=2)
    os.replace(tmp, path)


class RouteTable:
    """Routes read from a file, re-read when the file changes (the control plane adds endpoints live)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._routes: dict[str, Route] = {}

    def get(self, endpoint: str) -> Route | None:
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._routes = load_routes(self.path) if stamp else {}
            self._stamp = stamp
        return self._routes.get(endpoint)

    def all(self) -> dict[str, Route]:
        """Every route of the table as last read (re-read when the file changed)."""
        self.get("")
        return dict(self._routes)
