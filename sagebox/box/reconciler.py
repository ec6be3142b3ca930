"""The box's control plane: it watches the embedded SageMaker and does what SageMaker does with endpoints.

Whenever an endpoint is created, updated or deleted — by `cdk deploy`, boto3, the SageMaker SDK or Terraform —
the reconciler reads its endpoint config and models, fetches each variant's model data, starts its instances
(serving processes, or containers of its image), waits for /ping and only then moves the endpoint to InService
and routes the runtime gateway to it; or to Failed, with the reason from the container. A deleted endpoint's
instances are stopped. An instance that dies is replaced from the same model data.

An update runs as SageMaker's deployment guardrails run it (sagebox.box.guardrails): the new config's fleet
starts beside the serving one (and the update fails, leaving the old fleet serving, if it does not become
healthy); the gateway then shifts traffic to it as the update's DeploymentConfig says (all at once, canary,
linear), with a baking period after each step; a rollback alarm in ALARM during a bake sends all traffic back to
the old fleet and stops the new one (`RollingBack`, then `InService` on the old config with the reason); after
the last bake the new fleet serves and the old one stops after the termination wait. A capacity change
(UpdateEndpointWeightsAndCapacities, which autoscaling calls) starts or stops instances of the serving fleet.

Endpoint types: a shadow variant runs instances of its own, which the gateway sends copies of production's
requests to (sagebox.box.shadow); a serverless variant runs one instance, stopped after an idle period and started
again when a request waits for it (sagebox.box.serverless); an asynchronous endpoint's config reaches the gateway,
which queues its requests (sagebox.box.async_inference).

State is level-triggered: every pass compares what the embedded SageMaker says with what runs, so a missed
notification only costs one poll interval. Deployment times run on box time (`time_scale`, see
sagebox.box.embedded_aws.config.TIME_SCALE_ENV).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box import serverless
from sagebox.box import specs as sm
from sagebox.box import specs as specs_mod
from sagebox.box.data_capture import CaptureConfig
from sagebox.box.fleet import Instance, Launcher, answers_ping, fetch_model_data, wait_healthy
from sagebox.box.guardrails import COMPLETED, IN_PROGRESS, ROLLED_BACK, DeploymentPolicy, GuardrailError, Rollout
from sagebox.box.routes import FleetRoute, Route, VariantRoute, save_routes
from sagebox.box.specs import AsyncConfig, EndpointSpec, SpecError, VariantSpec

log = logging.getLogger("sagebox.control")

FLEET_FILE = "fleet.json"
ROUTES_FILE = "routes.json"
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
        spawn: Callable[[Callable[[], None], str], None] | None = None,
        probe: Callable[[Instance], bool] = answers_ping,
        probe_every_s: float = 5.0,
        unhealthy_after: int = 3,
        time_scale: float = 1.0,
        alarms: Callable[[], Mapping[str, str]] = dict,
        on_pass: Callable[[], None] = lambda: None,
        wall: Callable[[], float] = time.time,
        serverless_idle_s: float = serverless.DEFAULT_IDLE_S,
    ) -> None:
        """`healthy(instance, timeout_s)` waits for /ping, `fetch(s3, url, dest)` untars model data, `spawn(fn,
        name)` runs a deployment in the background (a thread by default), `probe(instance)` is one health check of
        a serving instance, made every `probe_every_s`; `unhealthy_after` failed checks in a row replace it (as
        SageMaker replaces an instance whose health check fails). `alarms()` names the CloudWatch alarms now in
        ALARM (name -> reason), `on_pass()` runs first on every pass (alarm evaluation, autoscaling); deployment
        waits last `time_scale` times their length. A serverless variant scales to zero after `serverless_idle_s`
        box seconds without a request, judged on `wall()` (epoch seconds, the clock of the gateway's activity
        file). Injectable for tests."""
        self._backend = backend
        self._launcher = launcher
        self._s3 = s3
        self._state_dir = state_dir
        self._settle = settle
        self._poll_s = poll_s
        self._clock = clock
        self._healthy = healthy
        self._fetch = fetch
        self._spawn = spawn or _thread
        self._probe = probe
        self._probe_every_s = probe_every_s
        self._unhealthy_after = unhealthy_after
        self._time_scale = time_scale
        self._alarms = alarms
        self._on_pass = on_pass
        self._wall = wall
        self._serverless_idle_s = serverless_idle_s
        self._last_probe = -float("inf")
        self._failed_probes: dict[int, int] = {}  # id(instance) -> failed health checks in a row
        self._wake = threading.Event()
        self._lock = threading.RLock()
        self.live: dict[str, Deployment] = {}
        self.updates: dict[str, Update] = {}
        self.retiring: list[Retiring] = []
        # Fleets of deleted endpoints whose instances are being stopped in the background: a shutdown meanwhile
        # stops them too (otherwise the box's exit would orphan the variants not yet reached).
        self.deleting: list[Deployment] = []
        self._in_flight: dict[str, str] = {}  # endpoint -> config being deployed
        self._resizing: set[str] = set()
        self._history: dict[str, dict[str, Any]] = {}  # endpoint -> last update, rollbacks, scaling events
        self._stopping = False

    def box_now(self) -> float:
        """Box time (seconds): the clock, sped up by the time scale."""
        return self._clock() / self._time_scale

    # --- the loop ---------------------------------------------------------------------------------------------

    def notify(self, kind: str = "", endpoint: str = "") -> None:
        """An endpoint changed. A deleted one stops taking traffic before DeleteEndpoint answers (as on SageMaker,
        nothing reaches a deleted endpoint); its instances stop in the background."""
        if kind == "deleted":
            with self._lock:
                removed = self._forget(endpoint)
                self.deleting += removed
            if removed:
                self._write_routes()
                for deployment in removed:
                    self._spawn(functools.partial(self._retire, deployment), f"retire-{endpoint}")
        self._wake.set()

    def _forget(self, endpoint: str) -> list[Deployment]:
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

    def _retire(self, deployment: Deployment) -> None:
        log.info("endpoint %s: stopping the instances of config %s", deployment.endpoint, deployment.config_name)
        deployment.stop()
        with self._lock:
            self.deleting = [d for d in self.deleting if d is not deployment]
        self._write_fleet()

    def run(self, stop: threading.Event) -> None:
        self._write_routes()
        while not stop.is_set():
            try:
                self.reconcile_once()
            except Exception:  # the control plane must outlive any one bad pass
                log.exception("reconcile pass failed")
            self._wake.wait(self._poll_s)
            self._wake.clear()

    def shutdown(self) -> None:
        """Stop every instance (SIGTERM, then SIGKILL after SageMaker's 30 s)."""
        with self._lock:
            self._stopping = True
            fleets = list(self.live.values()) + [u.green for u in self.updates.values()]
            fleets += [r.deployment for r in self.retiring] + self.deleting
            self.live, self.updates, self.retiring, self.deleting = {}, {}, [], []
        threads = [threading.Thread(target=d.stop) for d in fleets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._write_routes()
        self._write_fleet()

    def reconcile_once(self) -> None:
        self._on_pass()
        endpoints = specs_mod.read_endpoints(self._backend())
        with self._lock:
            if self._stopping:
                return
            for name, spec in endpoints.items():
                live = self.live.get(name)
                if isinstance(spec, SpecError):
                    self._fail_spec(name, spec)
                    if live is not None:
                        self._heal(live)
                    continue
                if spec.status == sm.CREATING and self._in_flight.get(name) != spec.config_name:
                    self._start_deploy(spec)
                elif spec.status == sm.UPDATING and name not in self.updates:
                    if live is None or spec.update_pending or spec.config_name != live.config_name:
                        if self._in_flight.get(name) != spec.config_name:
                            self._start_deploy(spec)
                    elif name not in self._resizing and name not in self._in_flight:
                        self._resizing.add(name)
                        self._spawn(functools.partial(self._resize, spec), f"resize-{name}")
                if live is not None and spec.status != sm.CREATING:
                    self._heal(live)
                if name in self.updates:
                    self._heal(self.updates[name].green)
            gone = {name for name in [*self.live, *self.updates] if name not in endpoints}
            removed = [d for name in gone for d in self._forget(name)]
        if removed:
            self._write_routes()
        for deployment in removed:
            self._retire(deployment)
        self._advance_updates()
        self._retire_due()
        self._serverless_pass()

    def _start_deploy(self, spec: EndpointSpec) -> None:
        self._in_flight[spec.name] = spec.config_name
        self._spawn(functools.partial(self._deploy, spec), f"deploy-{spec.name}")

    # --- deployments ------------------------------------------------------------------------------------------

    def _deploy(self, spec: EndpointSpec) -> None:
        started = self._clock()
        log.info("endpoint %s: deploying config %s (%s)", spec.name, spec.config_name, spec.status)
        with self._lock:
            live = self.live.get(spec.name)
            updating = spec.status == sm.UPDATING and live is not None
            retained = _retained(live) if updating and spec.retain_variant_properties and live else {}
        try:
            if updating:
                self._describe_pending(spec.name, spec, None, "Creating", "starting the new fleet")
            deployment = self._start(spec, started, retained)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:1000] or type(exc).__name__
            log.warning("endpoint %s: config %s failed: %s", spec.name, spec.config_name, reason)
            self._finish_failed(spec, reason)
        else:
            if updating:
                self._begin_update(spec, deployment)
            else:
                self._finish_ok(spec, deployment)
        finally:
            with self._lock:
                if self._in_flight.get(spec.name) == spec.config_name:
                    del self._in_flight[spec.name]
            self._settle()
            self._write_fleet()
            self.notify()

    def _config_dir(self, spec: EndpointSpec) -> Path:
        """Where a deployment's model data goes: per config, and apart from a running fleet of the same config
        (UpdateEndpoint to the config that serves redeploys it beside itself)."""
        with self._lock:
            running = [self.live.get(spec.name)] + [
                r.deployment for r in self.retiring if r.deployment.endpoint == spec.name
            ]
            taken = {f.model_dir.parent.parent for d in running if d is not None for f in d.variants}
        base = self._state_dir / "endpoints" / spec.name / spec.config_name
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = base.with_name(f"{spec.config_name}~{n}")
        return candidate

    def _start(self, spec: EndpointSpec, started: float, retained: Mapping[str, tuple[int, float]]) -> Deployment:
        variants: list[VariantFleet] = []
        config_dir = self._config_dir(spec)
        try:
            for variant in spec.variants:
                resolved = self._launcher.resolve_image(variant.image)
                model_dir = config_dir / variant.name / "model"
                self._fetch(self._s3, variant.model_data_url, model_dir)
                count, weight = retained.get(variant.name, (variant.instance_count, variant.weight))
                fleet = VariantFleet(
                    variant, resolved, model_dir, weight=weight, desired=count, warm_since=self._wall()
                )
                variants.append(fleet)
                for index in range(count):
                    fleet.instances.append(self._launcher.launch(spec.name, variant, index, model_dir))
            for fleet in variants:
                for instance in fleet.instances:
                    try:
                        self._healthy(instance, fleet.spec.startup_timeout_s)
                    except Exception as exc:
                        raise specs_mod.SpecError(
                            f"The primary container for production variant {fleet.spec.name} did not pass the "
                            f"ping health check: {exc}"
                        ) from None
        except BaseException:
            for fleet in variants:
                for instance in fleet.instances:
                    instance.stop()
            raise
        now = self._wall()
        for fleet in variants:
            fleet.warm_since = now
        return Deployment(spec.name, spec.config_name, variants, started, spec.async_config, spec.capture)

    def _current(self, name: str) -> Any:
        return self._backend().endpoints.get(name)

    def _finish_ok(self, spec: EndpointSpec, deployment: Deployment) -> None:
        with self._lock:
            endpoint = self._current(spec.name)
            stale = endpoint is None or _wanted(endpoint) != spec.config_name or self._stopping
            old = None if stale else self.live.get(spec.name)
            if not stale:
                self.live[spec.name] = deployment
        if stale:
            log.info("endpoint %s changed while config %s deployed: discarding it", spec.name, spec.config_name)
            deployment.stop()
            return
        # Traffic and the record of what runs first, the status last: whoever sees InService can use it.
        self._write_routes()
        self._write_fleet()
        with self._lock:
            endpoint.endpoint_config_name = spec.config_name
            endpoint.pending_deployment_summary = None
            _describe_serving(endpoint, deployment)
            endpoint.failure_reason = None
            endpoint.last_modified_time = _now()
            endpoint.endpoint_status = sm.IN_SERVICE
        if old is not None and old is not deployment:
            log.info("endpoint %s: config %s serves; stopping config %s", spec.name, spec.config_name, old.config_name)
            old.stop()
        log.info("endpoint %s InService (config %s)", spec.name, spec.config_name)

    def _finish_failed(self, spec: EndpointSpec, reason: str) -> None:
        with self._lock:
            endpoint = self._current(spec.name)
            if endpoint is None or _wanted(endpoint) != spec.config_name:
                return
            previous = self.live.get(spec.name)
            endpoint.failure_reason = reason
            endpoint.last_modified_time = _now()
            endpoint.pending_deployment_summary = None
            if spec.status == sm.UPDATING and previous is not None:
                # SageMaker keeps the endpoint on its previous config when an update fails.
                endpoint.endpoint_config_name = previous.config_name
                endpoint.endpoint_status = sm.IN_SERVICE
                self._record_update(spec.name, spec.config_name, "failed", reason)
            else:
                endpoint.endpoint_status = sm.FAILED

    def _fail_spec(self, name: str, error: SpecError) -> None:
        endpoint = self._current(name)
        if endpoint is not None and endpoint.endpoint_status in (sm.CREATING, sm.UPDATING):
            if name in self.live:  # an update whose config or model cannot be deployed: the old config serves on
                endpoint.pending_deployment_summary = None
                endpoint.endpoint_config_name = self.live[name].config_name
                endpoint.endpoint_status = sm.IN_SERVICE
            else:
                endpoint.endpoint_status = sm.FAILED
            endpoint.failure_reason = str(error)
            self._settle()

    # --- blue/green updates -----------------------------------------------------------------------------------

    def _begin_update(self, spec: EndpointSpec, green: Deployment) -> None:
        """The new fleet is healthy: hand it to the guardrails, which shift traffic from the next pass on."""
        try:
            policy = DeploymentPolicy.from_config(spec.deployment)
        except GuardrailError as exc:  # the API checked it; a config changed since cannot be run
            green.stop()
            self._finish_failed(spec, str(exc))
            return
        with self._lock:
            endpoint = self._current(spec.name)
            if endpoint is None or _wanted(endpoint) != spec.config_name or self._stopping:
                stale = True
            else:
                stale = False
                # The execution timeout counts from here: starting instances takes real time, which the box's time
                # scale does not shorten (a 0.01 scale would otherwise spend a 1620 s timeout on process start-up).
                rollout = Rollout(policy, green.instance_count(), requested_at=self.box_now())
                self.updates[spec.name] = Update(spec, green, rollout)
        if stale:
            log.info("endpoint %s changed while config %s deployed: discarding it", spec.name, spec.config_name)
            green.stop()
            return
        log.info("endpoint %s: config %s is healthy; %s", spec.name, spec.config_name, policy.describe())
        self._advance_update(spec.name, self._alarms())

    def _advance_updates(self) -> None:
        with self._lock:
            names = list(self.updates)
        if names:
            firing = dict(self._alarms())
            for name in names:
                self._advance_update(name, firing)

    def _advance_update(self, name: str, firing: Mapping[str, str]) -> None:
        with self._lock:
            update = self.updates.get(name)
            if update is None:
                return
            step = update.rollout.advance(self.box_now(), firing)
            changed = step.changed or step.status != update.status
            if step.outcome != IN_PROGRESS:
                if not step.changed:
                    return  # another thread saw this update end and finishes it
                self.updates.pop(name, None)
                if step.outcome == COMPLETED and self._current(name) is not None:
                    # In the same step as the update leaves: traffic never returns to the old fleet meanwhile.
                    old = self.live.get(name)
                    self.live[name] = update.green
                    stop_at = update.rollout.retire_at()
                    if old is not None:
                        self.retiring.append(Retiring(old, self.box_now() if stop_at is None else stop_at))
            elif changed:
                update.status, update.message = step.status, step.message
                log.info("endpoint %s: %s", name, step.message)
                self._describe_pending(name, update.spec, update.green, step.status, step.message)
        if step.outcome == IN_PROGRESS:
            if changed:
                self._write_routes()
                self._write_fleet()
        elif step.outcome == COMPLETED:
            self._complete(name, update)
        elif step.outcome == ROLLED_BACK:
            self._roll_back(name, update, step.message)

    def _complete(self, name: str, update: Update) -> None:
        """The new fleet serves alone (switched by `_advance_update`); the endpoint is InService on its config."""
        with self._lock:
            endpoint = self._current(name)
        if endpoint is None or self.live.get(name) is not update.green:  # deleted meanwhile
            update.green.stop()
            return
        self._write_routes()
        with self._lock:
            endpoint.endpoint_config_name = update.spec.config_name
            endpoint.pending_deployment_summary = None
            _describe_serving(endpoint, update.green)
            endpoint.failure_reason = None
            endpoint.last_modified_time = _now()
            endpoint.endpoint_status = sm.IN_SERVICE
            self._record_update(name, update.spec.config_name, COMPLETED, "all traffic on the new fleet")
        log.info("endpoint %s InService (config %s)", name, update.spec.config_name)
        self._write_fleet()
        self._settle()
        self._retire_due()

    def _roll_back(self, name: str, update: Update, reason: str) -> None:
        """All traffic back to the old fleet at once, then the new fleet stops; the endpoint is RollingBack until
        it has, then InService on its old config with the reason."""
        config = update.spec.config_name
        with self._lock:
            self.updates.pop(name, None)
            endpoint = self._current(name)
            failure = f"Update to endpoint config {config} was rolled back: {reason}"
            if endpoint is not None:
                endpoint.endpoint_status = sm.ROLLING_BACK
                endpoint.failure_reason = failure
                endpoint.last_modified_time = _now()
            self._record_update(name, config, ROLLED_BACK, reason)
        log.warning("endpoint %s: %s", name, failure)
        self._write_routes()
        self._write_fleet()
        self._settle()
        self._spawn(functools.partial(self._finish_rollback, name, update), f"rollback-{name}")

    def _finish_rollback(self, name: str, update: Update) -> None:
        update.green.stop()
        with self._lock:
            endpoint = self._current(name)
            live = self.live.get(name)
            if endpoint is not None and endpoint.endpoint_status == sm.ROLLING_BACK:
                endpoint.pending_deployment_summary = None
                if live is not None:
                    endpoint.endpoint_config_name = live.config_name
                    _describe_serving(endpoint, live)
                endpoint.last_modified_time = _now()
                endpoint.endpoint_status = sm.IN_SERVICE
        self._write_fleet()
        self._settle()
        self.notify()

    def _retire_due(self) -> None:
        """Stop the old fleets whose termination wait has passed (in the background: SIGTERM grace)."""
        now = self.box_now()
        with self._lock:
            due = [r for r in self.retiring if r.stop_at <= now]
            self.retiring = [r for r in self.retiring if r.stop_at > now]
        for leaving in due:
            self._spawn(functools.partial(self._retire, leaving.deployment), f"retire-{leaving.deployment.endpoint}")

    def _describe_pending(
        self, name: str, spec: EndpointSpec, green: Deployment | None, status: str, message: str
    ) -> None:
        """DescribeEndpoint's PendingDeploymentSummary: the new config's variants and where the update stands."""
        with self._lock:
            endpoint = self._current(name)
            pending = getattr(endpoint, "pending_deployment_summary", None) if endpoint is not None else None
            if not pending:
                return
            fleets = {f.spec.name: f for f in green.variants} if green is not None else {}
            summaries = []
            for variant in spec.variants:
                fleet = fleets.get(variant.name)
                count = len(fleet.instances) if fleet else 0
                summary: dict[str, Any] = {
                    "VariantName": variant.name,
                    "CurrentInstanceCount": count,
                    "DesiredInstanceCount": fleet.desired if fleet else variant.instance_count,
                    "CurrentWeight": fleet.weight if fleet else variant.weight,
                    "DesiredWeight": fleet.weight if fleet else variant.weight,
                    "InstanceType": variant.instance_type,
                    "VariantStatus": [{"Status": status, "StatusMessage": message, "StartTime": _now()}],
                }
                if fleet:
                    summary["DeployedImages"] = [
                        {
                            "SpecifiedImage": variant.image,
                            "ResolvedImage": fleet.resolved_image,
                            "ResolutionTime": _now(),
                        }
                    ]
                summaries.append(summary)
            pending["ProductionVariants"] = summaries

    def _record_update(self, name: str, config: str, outcome: str, reason: str) -> None:
        entry = self._history.setdefault(name, {"rollbacks": 0, "scaling": []})
        entry["last_update"] = {"config": config, "outcome": outcome, "reason": reason, "at": _now().isoformat()}
        if outcome == ROLLED_BACK:
            entry["rollbacks"] += 1

    # --- capacity ---------------------------------------------------------------------------------------------

    def _resize(self, spec: EndpointSpec) -> None:
        """UpdateEndpointWeightsAndCapacities: new weights, and instances started or stopped to the desired counts;
        the endpoint is InService again once they serve (on a failed start, at its previous count)."""
        failure = ""
        try:
            with self._lock:
                live = self.live.get(spec.name)
            if live is None:
                return
            for wanted in spec.desired:
                fleet = next((f for f in live.variants if f.spec.name == wanted.variant), None)
                if fleet is None:
                    continue
                if wanted.weight is not None:
                    fleet.weight = wanted.weight
                if wanted.instances is None or wanted.instances == len(fleet.instances):
                    fleet.desired = len(fleet.instances)
                    continue
                failure = self._scale_variant(live, fleet, wanted.instances) or failure
            self._write_routes()
            self._write_fleet()
            with self._lock:
                endpoint = self._current(spec.name)
                if (
                    endpoint is not None
                    and endpoint.endpoint_status == sm.UPDATING
                    and self.live.get(spec.name) is live
                ):
                    _describe_serving(endpoint, live)
                    endpoint.failure_reason = failure or None
                    endpoint.last_modified_time = _now()
                    endpoint.endpoint_status = sm.IN_SERVICE
        finally:
            with self._lock:
                self._resizing.discard(spec.name)
            self._settle()
            self.notify()

    def _scale_variant(self, live: Deployment, fleet: VariantFleet, count: int) -> str:
        before = len(fleet.instances)
        if count < before:
            with self._lock:
                leaving = fleet.instances[count:]
                del fleet.instances[count:]
                fleet.desired = count
            self._write_routes()  # out of the routes before they stop
            for instance in leaving:
                instance.stop()
            self._record_scaling(live.endpoint, fleet.spec.name, before, count)
            return ""
        started = [
            self._launcher.launch(live.endpoint, fleet.spec, index, fleet.model_dir) for index in range(before, count)
        ]
        try:
            for instance in started:
                self._healthy(instance, fleet.spec.startup_timeout_s)
        except Exception as exc:
            for instance in started:
                instance.stop()
            fleet.desired = before
            reason = " ".join(str(exc).split())[:500]
            log.warning("endpoint %s: scaling %s to %d failed: %s", live.endpoint, fleet.spec.name, count, reason)
            return f"Failed to scale variant {fleet.spec.name} to {count} instance(s): {reason}"
        with self._lock:
            fleet.instances.extend(started)
            fleet.desired = count
        self._record_scaling(live.endpoint, fleet.spec.name, before, count)
        return ""

    def _record_scaling(self, name: str, variant: str, before: int, after: int) -> None:
        log.info("endpoint %s: variant %s now runs %d instance(s) (was %d)", name, variant, after, before)
        with self._lock:
            entry = self._history.setdefault(name, {"rollbacks": 0, "scaling": []})
            entry["scaling"] = [
                *entry["scaling"][-(HISTORY - 1) :],
                {"variant": variant, "from": before, "to": after, "at": _now().isoformat()},
            ]

    # --- serverless -------------------------------------------------------------------------------------------

    def _serverless_pass(self) -> None:
        """Scale idle serverless variants to zero; start one whose requests wait (sagebox.box.serverless)."""
        with self._lock:
            fleets = [(d, f) for d in self.live.values() for f in d.variants if f.spec.serverless is not None]
        if not fleets:
            return
        activity = serverless.read_activity(self._state_dir)
        now = self._wall()
        for deployment, fleet in fleets:
            with self._lock:
                action = serverless.decide(
                    activity.get((deployment.endpoint, fleet.spec.name)),
                    warm=not fleet.cold,
                    starting=fleet.starting,
                    warm_since=fleet.warm_since,
                    now=now,
                    idle_real_s=self._serverless_idle_s * self._time_scale,
                )
                if action == "start":
                    fleet.starting = True
                elif action == "stop":
                    leaving, fleet.instances = fleet.instances, []
                    fleet.cold = True
                    fleet.scaled_to_zero += 1
            if action == "stop":
                log.info(
                    "endpoint %s: serverless variant %s is idle: scaling to zero", deployment.endpoint, fleet.spec.name
                )
                self._write_routes()  # out of the routes before it stops
                self._write_fleet()
                for instance in leaving:
                    self._spawn(instance.stop, f"scale-to-zero-{deployment.endpoint}")
            elif action == "start":
                self._spawn(functools.partial(self._cold_start, deployment, fleet), f"cold-start-{deployment.endpoint}")

    def _cold_start(self, deployment: Deployment, fleet: VariantFleet) -> None:
        """One instance of a serverless variant whose requests wait; the cold start is the time until it is
        healthy (the gateway reports the wait its requests saw)."""
        started = self._clock()
        instance = None
        try:
            instance = self._launcher.launch(deployment.endpoint, fleet.spec, 0, fleet.model_dir)
            self._healthy(instance, fleet.spec.startup_timeout_s)
        except Exception as exc:
            if instance is not None:
                instance.stop()
            reason = " ".join(str(exc).split())[:500]
            log.warning("endpoint %s: cold start of %s failed: %s", deployment.endpoint, fleet.spec.name, reason)
            with self._lock:
                fleet.starting = False
            return
        took = self._clock() - started
        with self._lock:
            if self.live.get(deployment.endpoint) is not deployment:  # deleted or replaced meanwhile
                fleet.starting = False
                gone = True
            else:
                gone = False
                fleet.instances = [instance]
                fleet.cold = fleet.starting = False
                fleet.warm_since = self._wall()
                fleet.cold_starts += 1
                fleet.last_cold_start_s = took
        if gone:
            instance.stop()
            return
        log.info(
            "endpoint %s: serverless variant %s cold start took %.2f s", deployment.endpoint, fleet.spec.name, took
        )
        self._write_routes()
        self._write_fleet()

    # --- health -----------------------------------------------------------------------------------------------

    def _heal(self, deployment: Deployment) -> None:
        probing = self._clock() - self._last_probe >= self._probe_every_s
        for fleet in deployment.variants:
            for position, instance in enumerate(fleet.instances):
                if instance.alive():
                    if not probing:
                        continue
                    if self._probe(instance):
                        self._failed_probes.pop(id(instance), None)
                        continue
                    failures = self._failed_probes.get(id(instance), 0) + 1
                    self._failed_probes[id(instance)] = failures
                    if failures < self._unhealthy_after:
                        continue
                    why = f"failed {failures} health checks in a row"
                    instance.stop()
                else:
                    why = f"exited ({' | '.join(instance.last_log_lines(1))})"
                self._failed_probes.pop(id(instance), None)
                log.warning(
                    "endpoint %s: instance %s of %s %s; replacing it",
                    deployment.endpoint,
                    instance.label,
                    fleet.spec.name,
                    why,
                )
                fleet.restarts += 1
                replacement = self._launcher.launch(deployment.endpoint, fleet.spec, position, fleet.model_dir)
                fleet.instances[position] = replacement
                self._write_routes()  # the failed instance takes no more traffic
                self._spawn(
                    functools.partial(self._await_replacement, deployment, fleet, replacement),
                    f"replace-{deployment.endpoint}",
                )
        if probing:
            self._last_probe = self._clock()

    def _await_replacement(self, deployment: Deployment, fleet: VariantFleet, instance: Instance) -> None:
        with contextlib.suppress(Exception):
            self._healthy(instance, fleet.spec.startup_timeout_s)
            log.info("endpoint %s: replacement %s is healthy", deployment.endpoint, instance.label)
        self._write_routes()
        self._write_fleet()

    # --- what other processes read ----------------------------------------------------------------------------

    def _write_routes(self) -> None:
        with self._lock:
            routes = {}
            for name, deployment in self.live.items():
                update = self.updates.get(name)
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

    def _write_fleet(self) -> None:
        with self._lock:
            now = self.box_now()
            fleet: dict[str, Any] = {}
            for name, d in self.live.items():
                entry: dict[str, Any] = {
                    "config": d.config_name,
                    "mode": self._launcher.mode,
                    "variants": self._variants(d),
                }
                if d.async_config is not None:
                    entry["async"] = d.async_config.describe()
                update = self.updates.get(name)
                if update is not None:
                    entry["update"] = {
                        "config": update.green.config_name,
                        "share": update.rollout.share,
                        "status": update.status,
                        "message": update.message,
                        "variants": self._variants(update.green),
                    }
                entry["retiring"] = [
                    {
                        "config": r.deployment.config_name,
                        "stops_in_s": max(0.0, (r.stop_at - now) * self._time_scale),
                        "variants": self._variants(r.deployment),
                    }
                    for r in self.retiring
                    if r.deployment.endpoint == name
                ]
                entry.update(self._history.get(name, {"rollbacks": 0, "scaling": []}))
                fleet[name] = entry
        _write_json(self._state_dir / FLEET_FILE, fleet)

    def _variants(self, d: Deployment) -> list[dict[str, Any]]:
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


def _thread(fn: Callable[[], None], name: str) -> None:
    threading.Thread(target=fn, name=name, daemon=True).start()


def _wanted(endpoint: Any) -> str:
    """The config an endpoint should run: its pending update's, else its own."""
    pending = getattr(endpoint, "pending_deployment_summary", None) or {}
    return str(pending.get("EndpointConfigName") or endpoint.endpoint_config_name)


def _retained(live: Deployment) -> dict[str, tuple[int, float]]:
    """RetainAllVariantProperties: the running instance count and weight of each variant."""
    return {f.spec.name: (len(f.instances), f.weight) for f in live.variants}


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


def _variant_status(fleets: list[VariantFleet]) -> list[dict[str, Any]]:
    """DescribeEndpoint's ProductionVariantSummary of each fleet (a serverless one has its ServerlessConfig, no
    instance count)."""
    now = _now()
    described = []
    for f in fleets:
        summary: dict[str, Any] = {
            "VariantName": f.spec.name,
            "CurrentWeight": f.weight,
            "DesiredWeight": f.weight,
        }
        if f.spec.serverless is not None:
            config = {
                "MemorySizeInMB": f.spec.serverless.memory_mb,
                "MaxConcurrency": f.spec.serverless.max_concurrency,
            }
            summary["CurrentServerlessConfig"] = summary["DesiredServerlessConfig"] = config
        else:
            summary["CurrentInstanceCount"] = len(f.instances)
            summary["DesiredInstanceCount"] = f.desired
        summary["DeployedImages"] = [
            {"SpecifiedImage": f.spec.image, "ResolvedImage": f.resolved_image, "ResolutionTime": now}
        ]
        described.append(summary)
    return described


def _describe_serving(endpoint: Any, deployment: Deployment) -> None:
    """What DescribeEndpoint says of the fleet that serves: its variants, shadow variants and async config."""
    endpoint.production_variants = _variant_status(deployment.production)
    endpoint.shadow_production_variants = _variant_status(deployment.shadows) or None
    endpoint.async_inference_config = deployment.async_config.describe() if deployment.async_config else None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(value, fh, indent=2, default=str)
    os.replace(tmp, path)


def load_fleet(state_dir: Path) -> dict[str, Any]:
    path = state_dir / FLEET_FILE
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}
