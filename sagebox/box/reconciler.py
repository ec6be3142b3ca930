"""The box's control plane: it watches the embedded SageMaker and does what SageMaker does with endpoints.

Whenever an endpoint is created, updated or deleted — by `cdk deploy`, boto3, the SageMaker SDK or Terraform —
the reconciler reads its endpoint config and models, fetches each variant's model data, starts its instances
(serving processes, or containers of its image), waits for /ping and only then moves the endpoint to InService
and routes the runtime gateway to it; or to Failed, with the reason from the container. An update deploys the
new config beside the old one and switches traffic once it is healthy (the old instances keep serving until
then, and stay if the new config fails). A deleted endpoint's instances are stopped. An instance that dies is
replaced from the same model data.

State is level-triggered: every pass compares what the embedded SageMaker says with what runs, so a missed
notification only costs one poll interval.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box import specs as sm
from sagebox.box import specs as specs_mod
from sagebox.box.fleet import Instance, Launcher, answers_ping, fetch_model_data, wait_healthy
from sagebox.box.routes import Route, VariantRoute, save_routes
from sagebox.box.specs import EndpointSpec, SpecError, VariantSpec

log = logging.getLogger("sagebox.control")

FLEET_FILE = "fleet.json"
ROUTES_FILE = "routes.json"


@dataclass
class VariantFleet:
    spec: VariantSpec
    resolved_image: str
    model_dir: Path
    instances: list[Instance] = field(default_factory=list)
    restarts: int = 0


@dataclass
class Deployment:
    """One endpoint config running: what the gateway routes to while it is live."""

    endpoint: str
    config_name: str
    variants: list[VariantFleet]
    started_at: float

    def stop(self) -> None:
        for variant in self.variants:
            for instance in variant.instances:
                instance.stop()


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
    ) -> None:
        """`healthy(instance, timeout_s)` waits for /ping, `fetch(s3, url, dest)` untars model data, `spawn(fn,
        name)` runs a deployment in the background (a thread by default), `probe(instance)` is one health check of
        a serving instance, made every `probe_every_s`; `unhealthy_after` failed checks in a row replace it (as
        SageMaker replaces an instance whose health check fails). Injectable for tests."""
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
        self._last_probe = -float("inf")
        self._failed_probes: dict[int, int] = {}  # id(instance) -> failed health checks in a row
        self._wake = threading.Event()
        self._lock = threading.RLock()
        self.live: dict[str, Deployment] = {}
        self._in_flight: dict[str, str] = {}  # endpoint -> config being deployed
        self._stopping = False

    # --- the loop ---------------------------------------------------------------------------------------------

    def notify(self, kind: str = "", endpoint: str = "") -> None:
        """An endpoint changed. A deleted one stops taking traffic before DeleteEndpoint answers (as on SageMaker,
        nothing reaches a deleted endpoint); its instances stop in the background."""
        if kind == "deleted":
            with self._lock:
                removed = self.live.pop(endpoint, None)
            if removed is not None:
                self._write_routes()
                self._spawn(functools.partial(self._retire, removed), f"retire-{endpoint}")
        self._wake.set()

    def _retire(self, deployment: Deployment) -> None:
        log.info("endpoint %s deleted: stopping its instances", deployment.endpoint)
        deployment.stop()
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
            live, self.live = list(self.live.values()), {}
        threads = [threading.Thread(target=d.stop) for d in live]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._write_routes()
        self._write_fleet()

    def reconcile_once(self) -> None:
        endpoints = specs_mod.read_endpoints(self._backend())
        with self._lock:
            if self._stopping:
                return
            for name, spec in endpoints.items():
                if isinstance(spec, SpecError):
                    self._fail_spec(name, spec)
                elif spec.status in (sm.CREATING, sm.UPDATING) and self._in_flight.get(name) != spec.config_name:
                    self._in_flight[name] = spec.config_name
                    self._spawn(functools.partial(self._deploy, spec), f"deploy-{name}")
                elif spec.status == sm.IN_SERVICE and name in self.live:
                    self._heal(self.live[name])
            gone = [name for name in self.live if name not in endpoints]
            removed = [self.live.pop(name) for name in gone]
        if removed:
            self._write_routes()
        for deployment in removed:
            self._retire(deployment)

    # --- deployments ------------------------------------------------------------------------------------------

    def _deploy(self, spec: EndpointSpec) -> None:
        started = self._clock()
        log.info("endpoint %s: deploying config %s (%s)", spec.name, spec.config_name, spec.status)
        deployment: Deployment | None = None
        try:
            deployment = self._start(spec, started)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:1000] or type(exc).__name__
            log.warning("endpoint %s: config %s failed: %s", spec.name, spec.config_name, reason)
            self._finish_failed(spec, reason)
        else:
            self._finish_ok(spec, deployment)
        finally:
            with self._lock:
                if self._in_flight.get(spec.name) == spec.config_name:
                    del self._in_flight[spec.name]
            self._settle()
            self._write_fleet()
            self.notify()

    def _start(self, spec: EndpointSpec, started: float) -> Deployment:
        variants: list[VariantFleet] = []
        try:
            for variant in spec.variants:
                resolved = self._launcher.resolve_image(variant.image)
                model_dir = self._state_dir / "endpoints" / spec.name / spec.config_name / variant.name / "model"
                self._fetch(self._s3, variant.model_data_url, model_dir)
                fleet = VariantFleet(variant, resolved, model_dir)
                variants.append(fleet)
                for index in range(variant.instance_count):
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
        return Deployment(spec.name, spec.config_name, variants, started)

    def _current(self, name: str) -> Any:
        return self._backend().endpoints.get(name)

    def _finish_ok(self, spec: EndpointSpec, deployment: Deployment) -> None:
        with self._lock:
            endpoint = self._current(spec.name)
            stale = endpoint is None or endpoint.endpoint_config_name != spec.config_name or self._stopping
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
            endpoint.production_variants = _variant_status(deployment)
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
            if endpoint is None or endpoint.endpoint_config_name != spec.config_name:
                return
            previous = self.live.get(spec.name)
            endpoint.failure_reason = reason
            endpoint.last_modified_time = _now()
            if spec.status == sm.UPDATING and previous is not None:
                # SageMaker keeps the endpoint on its previous config when an update fails.
                endpoint.endpoint_config_name = previous.config_name
                endpoint.endpoint_status = sm.IN_SERVICE
            else:
                endpoint.endpoint_status = sm.FAILED

    def _fail_spec(self, name: str, error: SpecError) -> None:
        endpoint = self._current(name)
        if endpoint is not None and endpoint.endpoint_status in (sm.CREATING, sm.UPDATING):
            endpoint.endpoint_status = sm.FAILED
            endpoint.failure_reason = str(error)
            self._settle()

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
            routes = {
                name: Route(
                    name,
                    tuple(
                        VariantRoute(
                            f.spec.name,
                            f.spec.weight,
                            tuple(i.url for i in f.instances if i.alive()),
                            str(getattr(f.instances[0], "log_path", "")) if f.instances else "",
                        )
                        for f in deployment.variants
                    ),
                )
                for name, deployment in self.live.items()
            }
        save_routes(self._state_dir / ROUTES_FILE, routes)

    def _write_fleet(self) -> None:
        with self._lock:
            fleet = {
                name: {
                    "config": d.config_name,
                    "mode": self._launcher.mode,
                    "variants": [
                        {
                            "name": f.spec.name,
                            "model": f.spec.model_name,
                            "image": f.resolved_image,
                            "model_data_url": f.spec.model_data_url,
                            "model_dir": str(f.model_dir),
                            "instance_type": f.spec.instance_type,
                            "weight": f.spec.weight,
                            "restarts": f.restarts,
                            "instances": [{**i.describe(), "alive": i.alive()} for i in f.instances],
                        }
                        for f in d.variants
                    ],
                }
                for name, d in self.live.items()
            }
        _write_json(self._state_dir / FLEET_FILE, fleet)


def _thread(fn: Callable[[], None], name: str) -> None:
    threading.Thread(target=fn, name=name, daemon=True).start()


def _variant_status(deployment: Deployment) -> list[dict[str, Any]]:
    now = _now()
    return [
        {
            "VariantName": f.spec.name,
            "CurrentWeight": f.spec.weight,
            "DesiredWeight": f.spec.weight,
            "CurrentInstanceCount": len(f.instances),
            "DesiredInstanceCount": f.spec.instance_count,
            "DeployedImages": [
                {"SpecifiedImage": f.spec.image, "ResolvedImage": f.resolved_image, "ResolutionTime": now}
            ],
        }
        for f in deployment.variants
    ]


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
