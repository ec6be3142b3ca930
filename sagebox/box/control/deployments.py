"""Deployments: an endpoint config's fleet started, and the endpoint InService on it or Failed with the reason.

When an endpoint is created (or updated to a new config) the controller reads its endpoint config and models,
fetches each variant's model data, starts its instances (serving processes, or containers of its image) in the
background, and waits for /ping. A new endpoint is then routed to and InService; an update's new fleet is handed to
the guardrails (sagebox.box.control.rollouts), which shift traffic to it. An instance that does not become healthy
fails the deployment with the container's reason: the endpoint is Failed, or an update fails and the old config
serves on, as on SageMaker. An endpoint that changed while its config deployed discards that fleet.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sagebox.box import specs
from sagebox.box.control import describe
from sagebox.box.control.context import Context, Observed
from sagebox.box.control.fleet_state import Deployment, VariantFleet
from sagebox.box.control.rollouts import RolloutController
from sagebox.box.fleet import Instance, Launcher
from sagebox.box.guardrails import DeploymentPolicy, GuardrailError
from sagebox.box.specs import EndpointSpec, SpecError

log = logging.getLogger("sagebox.control")


class DeploymentController:
    def __init__(
        self,
        ctx: Context,
        rollouts: RolloutController,
        launcher: Launcher,
        s3: Any,
        state_dir: Path,
        healthy: Callable[[Instance, float], float],
        fetch: Callable[[Any, str | None, Path], Path],
    ) -> None:
        """`fetch(s3, url, dest)` untars a variant's model data under the box's `state_dir`; `healthy(instance,
        timeout_s)` waits for its /ping."""
        self._ctx = ctx
        self._rollouts = rollouts
        self._launcher = launcher
        self._s3 = s3
        self._state_dir = state_dir
        self._healthy = healthy
        self._fetch = fetch

    def reconcile(self, seen: list[Observed]) -> None:
        """Start the deployments that endpoints ask for and that are not under way; fail the endpoints whose config
        or model cannot be deployed (call with the lock held)."""
        state = self._ctx.state
        for endpoint in seen:
            spec = endpoint.spec
            if isinstance(spec, SpecError):
                self._fail_spec(endpoint.name, spec)
                continue
            # A new endpoint, or UpdateEndpoint (to a new config, or to the serving one: a redeploy) with no update
            # already running; a capacity change is the scaling controller's.
            asked = spec.status == specs.CREATING or (
                spec.status == specs.UPDATING and endpoint.name not in state.updates and not endpoint.capacity_change
            )
            if asked and state.in_flight.get(endpoint.name) != spec.config_name:
                self._start_deploy(spec)

    def _start_deploy(self, spec: EndpointSpec) -> None:
        self._ctx.state.in_flight[spec.name] = spec.config_name
        self._ctx.spawn(functools.partial(self._deploy, spec), f"deploy-{spec.name}")

    def _deploy(self, spec: EndpointSpec) -> None:
        ctx, state = self._ctx, self._ctx.state
        started = ctx.time.clock()
        log.info("endpoint %s: deploying config %s (%s)", spec.name, spec.config_name, spec.status)
        with state.lock:
            live = state.live.get(spec.name)
            updating = spec.status == specs.UPDATING and live is not None
            retained = _retained(live) if updating and spec.retain_variant_properties and live else {}
        try:
            if updating:
                with state.lock:
                    describe.pending(
                        ctx.current(spec.name), spec, None, "Creating", "starting the new fleet", ctx.utc()
                    )
            deployment = self._start(spec, started, retained)
        except Exception as exc:
            reason = _reason(exc)
            log.warning("endpoint %s: config %s failed: %s", spec.name, spec.config_name, reason)
            self._finish_failed(spec, reason)
        else:
            if updating:
                self._hand_over(spec, deployment)
            else:
                self._finish_ok(spec, deployment)
        finally:
            with state.lock:
                if state.in_flight.get(spec.name) == spec.config_name:
                    del state.in_flight[spec.name]
            ctx.settle()
            ctx.records.write_fleet()
            ctx.wake()

    def _config_dir(self, spec: EndpointSpec) -> Path:
        """Where a deployment's model data goes: per config, and apart from a running fleet of the same config
        (UpdateEndpoint to the config that serves redeploys it beside itself)."""
        with self._ctx.state.lock:
            running = self._ctx.state.running(spec.name)
            taken = {f.model_dir.parent.parent for d in running for f in d.variants}
        base = self._state_dir / "endpoints" / spec.name / spec.config_name
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = base.with_name(f"{spec.config_name}~{n}")
        return candidate

    def _start(self, spec: EndpointSpec, started: float, retained: Mapping[str, tuple[int, float]]) -> Deployment:
        """Every variant's instances started and healthy, or none left running (the exception says why)."""
        variants: list[VariantFleet] = []
        config_dir = self._config_dir(spec)
        wall = self._ctx.wall
        try:
            for variant in spec.variants:
                try:
                    resolved = self._launcher.resolve_image(variant.image)
                    model_dir = config_dir / variant.name / "model"
                    self._fetch(self._s3, variant.model_data_url, model_dir)
                except Exception as exc:  # the instance that would serve it cannot start: its log says why
                    self._ctx.note(spec.name, variant.name, None, _reason(exc))
                    raise
                count, weight = retained.get(variant.name, (variant.instance_count, variant.weight))
                fleet = VariantFleet(variant, resolved, model_dir, weight=weight, desired=count, warm_since=wall())
                variants.append(fleet)
                for index in range(count):
                    fleet.instances.append(self._launcher.launch(spec.name, variant, index, model_dir))
            for fleet in variants:
                for instance in fleet.instances:
                    try:
                        self._healthy(instance, fleet.spec.startup_timeout_s)
                    except Exception as exc:
                        reason = (
                            f"The primary container for production variant {fleet.spec.name} did not pass the "
                            f"ping health check: {exc}"
                        )
                        self._ctx.note(spec.name, fleet.spec.name, instance.instance_id, _reason(reason))
                        raise SpecError(reason) from None
        except BaseException:
            for fleet in variants:
                for instance in fleet.instances:
                    instance.stop()
            raise
        now = wall()
        for fleet in variants:
            fleet.warm_since = now
        return Deployment(spec.name, spec.config_name, variants, started, spec.async_config, spec.capture)

    def _hand_over(self, spec: EndpointSpec, green: Deployment) -> None:
        """An update's new fleet is healthy: the guardrails run the rest, under the update's DeploymentConfig."""
        try:
            policy = DeploymentPolicy.from_config(spec.deployment)
        except GuardrailError as exc:  # the API checked it; a config changed since cannot be run
            green.stop()
            self._finish_failed(spec, str(exc))
            return
        self._rollouts.begin(spec, green, policy)

    def _finish_ok(self, spec: EndpointSpec, deployment: Deployment) -> None:
        ctx, state = self._ctx, self._ctx.state
        with state.lock:
            endpoint = ctx.current(spec.name)
            stale = endpoint is None or describe.wanted(endpoint) != spec.config_name or state.stopping
            old = None if stale else state.live.get(spec.name)
            if not stale:
                state.live[spec.name] = deployment
        if stale:
            log.info("endpoint %s changed while config %s deployed: discarding it", spec.name, spec.config_name)
            deployment.stop()
            return
        # Traffic and the record of what runs first, the status last: whoever sees InService can use it.
        ctx.records.write_routes()
        ctx.records.write_fleet()
        with state.lock:
            describe.in_service(endpoint, deployment, ctx.utc())
        if old is not None and old is not deployment:
            log.info("endpoint %s: config %s serves; stopping config %s", spec.name, spec.config_name, old.config_name)
            old.stop()
        log.info("endpoint %s InService (config %s)", spec.name, spec.config_name)

    def _finish_failed(self, spec: EndpointSpec, reason: str) -> None:
        ctx, state = self._ctx, self._ctx.state
        with state.lock:
            endpoint = ctx.current(spec.name)
            if endpoint is None or describe.wanted(endpoint) != spec.config_name:
                return
            previous = state.live.get(spec.name)
            endpoint.failure_reason = reason
            endpoint.last_modified_time = ctx.utc()
            endpoint.pending_deployment_summary = None
            if spec.status == specs.UPDATING and previous is not None:
                # SageMaker keeps the endpoint on its previous config when an update fails.
                endpoint.endpoint_config_name = previous.config_name
                endpoint.endpoint_status = specs.IN_SERVICE
                state.record_update(spec.name, spec.config_name, "failed", reason)
            else:
                endpoint.endpoint_status = specs.FAILED

    def _fail_spec(self, name: str, error: SpecError) -> None:
        ctx, state = self._ctx, self._ctx.state
        endpoint = ctx.current(name)
        if endpoint is not None and endpoint.endpoint_status in (specs.CREATING, specs.UPDATING):
            if name in state.live:  # an update whose config or model cannot be deployed: the old config serves on
                endpoint.pending_deployment_summary = None
                endpoint.endpoint_config_name = state.live[name].config_name
                endpoint.endpoint_status = specs.IN_SERVICE
            else:
                endpoint.endpoint_status = specs.FAILED
            endpoint.failure_reason = str(error)
            ctx.settle()


def _reason(failure: BaseException | str) -> str:
    """A FailureReason: one line, at most 1000 characters (DescribeEndpoint's field allows 1024)."""
    text = " ".join(str(failure).split())[:1000]
    return text or type(failure).__name__


def _retained(live: Deployment) -> dict[str, tuple[int, float]]:
    """RetainAllVariantProperties: the running instance count and weight of each variant."""
    return {f.spec.name: (len(f.instances), f.weight) for f in live.variants}
