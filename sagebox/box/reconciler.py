"""The box's control plane: it watches the embedded SageMaker and does what SageMaker does with endpoints.

Whenever an endpoint is created, updated or deleted — by `cdk deploy`, boto3, the SageMaker SDK or Terraform —
the control plane reads its endpoint config and models, fetches each variant's model data, starts its instances
(serving processes, or containers of its image), waits for /ping and only then moves the endpoint to InService
and routes the runtime gateway to it; or to Failed, with the reason from the container. A deleted endpoint's
instances are stopped. An instance that dies is replaced from the same model data. Updates run under SageMaker's
deployment guardrails; capacity changes and serverless variants scale the serving fleet.

This module is the loop that runs it, as Kubernetes' controller-manager runs its controllers: it builds the one
shared fleet state and its `Context` (sagebox.box.control.context) and hands them to one controller per concern —
`deployments` (create, update), `rollouts` (blue/green traffic shifting, completion, roll back), `retirement`
(deleted endpoints and old fleets stopped), `scaling` (capacity changes, serverless scale to zero and cold starts),
`health` (dead or failing instances replaced) — each in sagebox.box.control, each readable and testable alone.

State is level-triggered: every pass compares what the embedded SageMaker says with what runs, so a missed
notification only costs one poll interval. Deployment times run on box time (`time_scale`, see
sagebox.box.embedded_aws.config.TIME_SCALE_ENV).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sagebox.box import serverless, specs
from sagebox.box.control.box_time import BoxTime
from sagebox.box.control.context import Context, Note, Observed, Spawn, no_note, thread
from sagebox.box.control.deployments import DeploymentController
from sagebox.box.control.fleet_state import Deployment, FleetState, Retiring, Update
from sagebox.box.control.health import HealthController
from sagebox.box.control.records import FLEET_FILE, ROUTES_FILE, Records, load_fleet
from sagebox.box.control.retirement import RetirementController
from sagebox.box.control.rollouts import RolloutController
from sagebox.box.control.scaling import ScalingController
from sagebox.box.fleet import Instance, Launcher, answers_ping, fetch_model_data, wait_healthy

# What the rest of the box (sagebox up/down, inventory, the bench) imports from here: the record files' names and
# the reader of fleet.json, which live beside the code that writes them (sagebox.box.control.records).
__all__ = ["FLEET_FILE", "ROUTES_FILE", "Reconciler", "load_fleet"]

log = logging.getLogger("sagebox.control")


class Reconciler:
    def __init__(
        self,
        backend: Callable[[], Any],
        launcher: Launcher,
        s3: Any,
        state_dir: Path,
        *,
        settle: Callable[[], None] = lambda: None,
        poll_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        healthy: Callable[[Instance, float], float] = wait_healthy,
        fetch: Callable[[Any, str | None, Path], Path] = fetch_model_data,
        spawn: Spawn | None = None,
        probe: Callable[[Instance], bool] = answers_ping,
        probe_every_s: float = 5.0,
        unhealthy_after: int = 3,
        time_scale: float = 1.0,
        alarms: Callable[[], Mapping[str, str]] = dict,
        on_pass: Callable[[], None] = lambda: None,
        wall: Callable[[], float] = time.time,
        serverless_idle_s: float = serverless.DEFAULT_IDLE_S,
        note: Note = no_note,
        before_fleet: Callable[[], None] = lambda: None,
    ) -> None:
        """`healthy(instance, timeout_s)` waits for /ping, `fetch(s3, url, dest)` untars model data, `spawn(fn,
        name)` runs a deployment in the background (a thread by default), `probe(instance)` is one health check of
        a serving instance, made every `probe_every_s`; `unhealthy_after` failed checks in a row replace it (as
        SageMaker replaces an instance whose health check fails). `alarms()` names the CloudWatch alarms now in
        ALARM (name -> reason), `on_pass()` runs first on every pass (alarm evaluation, autoscaling); deployment
        waits last `time_scale` times their length. A serverless variant scales to zero after `serverless_idle_s`
        box seconds without a request, judged on `wall()` (epoch seconds, the clock of the gateway's activity
        file). `note` writes a failure's reason into the endpoint's logs. `before_fleet()` runs before each write of
        fleet.json (the embedded AWS snapshots its state there). Injectable for tests."""
        self._backend = backend
        self._poll_s = poll_s
        self._on_pass = on_pass
        self._wake = threading.Event()
        self._time = BoxTime(clock, time_scale)
        self.state = FleetState()
        self._ctx = Context(
            self.state,
            Records(self.state, state_dir, launcher.mode, self._time, before_fleet),
            self._time,
            backend,
            spawn=spawn or thread,
            settle=settle,
            wake=self._wake.set,
            wall=wall,
            note=note,
        )
        ctx = self._ctx
        self.retirement = RetirementController(ctx)
        self.rollouts = RolloutController(ctx, self.retirement, alarms)
        self.deployments = DeploymentController(ctx, self.rollouts, launcher, s3, state_dir, healthy, fetch)
        self.scaling = ScalingController(ctx, launcher, healthy, state_dir, serverless_idle_s)
        self.health = HealthController(ctx, launcher, healthy, probe, probe_every_s, unhealthy_after)

    # --- the shared state, as callers and tests read it -------------------------------------------------------

    @property
    def live(self) -> dict[str, Deployment]:
        return self.state.live

    @property
    def updates(self) -> dict[str, Update]:
        return self.state.updates

    @property
    def retiring(self) -> list[Retiring]:
        return self.state.retiring

    @property
    def deleting(self) -> list[Deployment]:
        return self.state.deleting

    @property
    def _spawn(self) -> Spawn:
        return self._ctx.spawn

    @_spawn.setter
    def _spawn(self, spawn: Spawn) -> None:
        # Tests hold background work back by replacing it; every controller reads it from the shared context.
        self._ctx.spawn = spawn

    def box_now(self) -> float:
        """Box time (seconds): the clock, sped up by the time scale."""
        return self._time.now()

    # --- the loop ---------------------------------------------------------------------------------------------

    def notify(self, kind: str = "", endpoint: str = "") -> None:
        """An endpoint changed. A deleted one stops taking traffic before DeleteEndpoint answers (as on SageMaker,
        nothing reaches a deleted endpoint); its instances stop in the background."""
        if kind == "deleted":
            self.retirement.deleted(endpoint)
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        self._ctx.records.write_routes()
        while not stop.is_set():
            try:
                self.reconcile_once()
            except Exception:  # the control plane must outlive any one bad pass
                log.exception("reconcile pass failed")
            self._wake.wait(self._poll_s)
            self._wake.clear()

    def shutdown(self) -> None:
        """Stop every instance (SIGTERM, then SIGKILL after SageMaker's 30 s)."""
        self.retirement.stop_all()

    def reconcile_once(self) -> None:
        """One pass: every controller compares what the embedded SageMaker asks for with what runs, and acts.

        Under the lock, endpoint by endpoint: a deployment started (or an undeployable spec reported), a capacity
        change started, the endpoint's fleets healed. One endpoint at a time, all three, because work may run inline
        (tests spawn it so): the instances each step launches, and the health checks it makes, then come in the same
        order as they always did. Then the fleets of endpoints gone without a notification stop; updates advance
        (an old fleet they retire may be due at once); old fleets past their termination wait stop; serverless
        variants scale last, on the fleets as this pass left them."""
        self._on_pass()
        endpoints = specs.read_endpoints(self._backend())
        state = self.state
        with state.lock:
            if state.stopping:
                return
            self.health.start_pass()
            for name, spec in endpoints.items():
                seen = [Observed(name, spec, state.live.get(name))]
                self.deployments.reconcile(seen)
                self.scaling.reconcile(seen)
                self.health.reconcile(seen)
            removed = self.retirement.take_gone(endpoints)
        self.retirement.retire_taken(removed)
        self.rollouts.advance()
        self.retirement.retire_due()
        self.scaling.scale_serverless()
