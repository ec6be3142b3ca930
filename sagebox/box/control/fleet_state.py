"""The control plane's shared state: which fleets run for which endpoint, and in what role.

Every controller of sagebox.box.control reads and changes this one state under its lock, as Kubernetes' controllers
share one cache: an endpoint's `live` fleet serves; during a blue/green update `updates` holds the new fleet beside
it; an old fleet in `retiring` waits out its termination wait; a deleted endpoint's fleets in `deleting` are being
stopped (a shutdown meanwhile stops them too). `in_flight` and `resizing` say which background work is under way, so
that a pass does not start it twice; `history` is what fleet.json reports of past updates and scaling. The lock is
re-entrant: a controller that holds it may call another's step that takes it again.
"""

from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box.data_capture import CaptureConfig
from sagebox.box.fleet import Instance
from sagebox.box.guardrails import ROLLED_BACK, Rollout
from sagebox.box.specs import AsyncConfig, EndpointSpec, VariantSpec

HISTORY = 20  # scaling events kept per endpoint in fleet.json


@dataclass
class VariantFleet:
    spec: VariantSpec
    resolved_image: str
    model_dir: Path
    instances: list[Instance] = field(default_factory=list)
    restarts: int = 0
    weight: float = 1.0  # CurrentWeight
    desired: int = 1  # DesiredInstanceCount
    # Serverless variants: scaled to zero (no instance), a cold start under way, and what cold starts took.
    cold: bool = False
    starting: bool = False
    warm_since: float = 0.0  # epoch seconds the instance last became healthy
    cold_starts: int = 0
    last_cold_start_s: float | None = None
    scaled_to_zero: int = 0

    def state(self) -> str:
        return "starting" if self.starting else "cold" if self.cold else "warm"


@dataclass
class Deployment:
    """One endpoint config running: what the gateway routes to while it is live."""

    endpoint: str
    config_name: str
    variants: list[VariantFleet]
    started_at: float
    async_config: AsyncConfig | None = None
    capture: CaptureConfig | None = None

    @property
    def production(self) -> list[VariantFleet]:
        return [v for v in self.variants if not v.spec.shadow]

    @property
    def shadows(self) -> list[VariantFleet]:
        return [v for v in self.variants if v.spec.shadow]

    def stop(self) -> None:
        """Stop every instance of every variant at once (each gets SageMaker's SIGTERM grace, not one after another)."""
        threads = [threading.Thread(target=i.stop) for v in self.variants for i in v.instances]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def instance_count(self) -> int:
        return sum(len(v.instances) for v in self.variants)


@dataclass
class Update:
    """A blue/green update under way: the new config's fleet beside the serving one."""

    spec: EndpointSpec
    green: Deployment
    rollout: Rollout
    status: str = "Creating"
    message: str = ""


@dataclass
class Retiring:
    """An old fleet that no longer takes traffic, waiting for the termination wait (box time) to stop."""

    deployment: Deployment
    stop_at: float


@dataclass
class FleetState:
    lock: threading.RLock = field(default_factory=threading.RLock)
    live: dict[str, Deployment] = field(default_factory=dict)
    updates: dict[str, Update] = field(default_factory=dict)
    retiring: list[Retiring] = field(default_factory=list)
    deleting: list[Deployment] = field(default_factory=list)
    in_flight: dict[str, str] = field(default_factory=dict)  # endpoint -> config being deployed
    resizing: set[str] = field(default_factory=set)
    history: dict[str, dict[str, Any]] = field(default_factory=dict)  # endpoint -> last update, rollbacks, scaling
    stopping: bool = False

    def forget(self, endpoint: str) -> list[Deployment]:
        """Every fleet of an endpoint, taken out of the control plane's hands (call with the lock held)."""
        removed = []
        live = self.live.pop(endpoint, None)
        if live is not None:
            removed.append(live)
        update = self.updates.pop(endpoint, None)
        if update is not None:
            removed.append(update.green)
        leaving = [r for r in self.retiring if r.deployment.endpoint == endpoint]
        self.retiring = [r for r in self.retiring if r.deployment.endpoint != endpoint]
        return removed + [r.deployment for r in leaving]

    def take_all(self) -> list[Deployment]:
        """Every fleet, for a shutdown: from now on the control plane runs nothing (call with the lock held)."""
        self.stopping = True
        fleets = list(self.live.values()) + [u.green for u in self.updates.values()]
        fleets += [r.deployment for r in self.retiring] + self.deleting
        self.live, self.updates, self.retiring, self.deleting = {}, {}, [], []
        return fleets

    def running(self, endpoint: str) -> list[Deployment]:
        """The endpoint's fleets whose instances run from model data on disk: the live one and any retiring."""
        live = self.live.get(endpoint)
        return ([live] if live is not None else []) + [
            r.deployment for r in self.retiring if r.deployment.endpoint == endpoint
        ]

    def record_update(self, name: str, config: str, outcome: str, reason: str) -> None:
        entry = self._history(name)
        entry["last_update"] = {"config": config, "outcome": outcome, "reason": reason, "at": _utc_iso()}
        if outcome == ROLLED_BACK:
            entry["rollbacks"] += 1

    def record_scaling(self, name: str, variant: str, before: int, after: int) -> None:
        with self.lock:
            entry = self._history(name)
            entry["scaling"] = [
                *entry["scaling"][-(HISTORY - 1) :],
                {"variant": variant, "from": before, "to": after, "at": _utc_iso()},
            ]

    def _history(self, name: str) -> dict[str, Any]:
        return self.history.setdefault(name, {"rollbacks": 0, "scaling": []})


def _utc_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()
