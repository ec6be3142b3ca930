"""What the control plane writes for other processes to read: the route table and the fleet record.

`routes.json` (sagebox.box.routes) is the runtime gateway's route table: each serving endpoint's variants and the
URLs of their live instances, an update's new fleet and its share of the traffic, shadow variants and their sampled
share, the async and data capture configs. `fleet.json` is the box's own record of what runs, read by `sagebox box
status`, `sagebox down` and the bench through `load_fleet`: per endpoint its config, launch mode, variants and
instances, an update under way, old fleets waiting to stop, past updates, rollbacks and scaling events.

Both are written whole from the shared fleet state and replaced atomically, so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagebox.box.control.box_time import BoxTime
from sagebox.box.control.fleet_state import Deployment, FleetState, VariantFleet
from sagebox.box.routes import FleetRoute, Route, VariantRoute, save_routes

FLEET_FILE = "fleet.json"
ROUTES_FILE = "routes.json"


def _nothing() -> None:
    return None


class Records:
    def __init__(
        self, state: FleetState, state_dir: Path, mode: str, time: BoxTime, before_fleet: Callable[[], None] = _nothing
    ) -> None:
        """`mode` is the launcher's ("processes" or "containers"), reported per endpoint. `before_fleet()` runs before
        each write of fleet.json, after the control plane changed what it runs and what DescribeEndpoint says (the
        embedded AWS snapshots its state there: whoever sees fleet.json change finds the change on disk)."""
        self._before_fleet = before_fleet
        self._state = state
        self._state_dir = state_dir
        self._mode = mode
        self._time = time

    def write_routes(self) -> None:
        state = self._state
        with state.lock:
            routes = {}
            for name, deployment in state.live.items():
                update = state.updates.get(name)
                share = update.rollout.share if update is not None else 0.0
                routes[name] = Route(
                    name,
                    _variant_routes(deployment),
                    deployment.config_name,
                    FleetRoute(update.green.config_name, share, _variant_routes(update.green))
                    if update is not None and share > 0
                    else None,
                    _shadow_routes(deployment),
                    deployment.async_config.describe() if deployment.async_config else None,
                    deployment.capture.describe() if deployment.capture else None,
                )
        save_routes(self._state_dir / ROUTES_FILE, routes)

    def write_fleet(self) -> None:
        self._before_fleet()
        state = self._state
        with state.lock:
            now = self._time.now()
            fleet: dict[str, Any] = {}
            for name, d in state.live.items():
                entry: dict[str, Any] = {"config": d.config_name, "mode": self._mode, "variants": _variants(d)}
                if d.async_config is not None:
                    entry["async"] = d.async_config.describe()
                update = state.updates.get(name)
                if update is not None:
                    entry["update"] = {
                        "config": update.green.config_name,
                        "share": update.rollout.share,
                        "status": update.status,
                        "message": update.message,
                        "variants": _variants(update.green),
                    }
                entry["retiring"] = [
                    {
                        "config": r.deployment.config_name,
                        "stops_in_s": max(0.0, self._time.real_s(r.stop_at - now)),
                        "variants": _variants(r.deployment),
                    }
                    for r in state.retiring
                    if r.deployment.endpoint == name
                ]
                entry.update(state.history.get(name, {"rollbacks": 0, "scaling": []}))
                fleet[name] = entry
        _write_json(self._state_dir / FLEET_FILE, fleet)


def load_fleet(state_dir: Path) -> dict[str, Any]:
    path = state_dir / FLEET_FILE
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _variants(d: Deployment) -> list[dict[str, Any]]:
    return [
        {
            "name": f.spec.name,
            "model": f.spec.model_name,
            "image": f.resolved_image,
            "model_data_url": f.spec.model_data_url,
            "model_dir": str(f.model_dir),
            "instance_type": f.spec.instance_type,
            "weight": f.weight,
            "desired": f.desired,
            "restarts": f.restarts,
            "instances": [{**i.describe(), "alive": i.alive()} for i in f.instances],
            "shadow": f.spec.shadow,
            **(
                {
                    "serverless": {
                        "memory_mb": f.spec.serverless.memory_mb,
                        "max_concurrency": f.spec.serverless.max_concurrency,
                        "state": f.state(),
                        "cold_starts": f.cold_starts,
                        "last_cold_start_s": f.last_cold_start_s,
                        "scaled_to_zero": f.scaled_to_zero,
                    }
                }
                if f.spec.serverless is not None
                else {}
            ),
        }
        for f in d.variants
    ]


def _route(fleet: VariantFleet, weight: float) -> VariantRoute:
    spec = fleet.spec
    return VariantRoute(
        spec.name,
        weight,
        tuple(i.url for i in fleet.instances if i.alive()),
        str(getattr(fleet.instances[0], "log_path", "")) if fleet.instances else "",
        spec.serverless.max_concurrency if spec.serverless else None,
        fleet.cold,
        float(spec.startup_timeout_s),
    )


def _variant_routes(deployment: Deployment) -> tuple[VariantRoute, ...]:
    return tuple(_route(f, f.weight) for f in deployment.production)


def _shadow_routes(deployment: Deployment) -> tuple[VariantRoute, ...]:
    """Each shadow's share of production's requests: its weight relative to the (one) production variant's, the
    sampling a shadow test's SamplingPercentage sets (CreateInferenceExperiment, ShadowModelVariantConfig)."""
    production = deployment.production
    base = production[0].weight if production else 0.0
    return tuple(_route(f, min(1.0, f.weight / base) if base > 0 else 0.0) for f in deployment.shadows)


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(value, fh, indent=2, default=str)
    os.replace(tmp, path)
