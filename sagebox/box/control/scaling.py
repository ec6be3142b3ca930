"""Scaling: instance counts changed on the serving fleet, and serverless variants scaled to zero and back.

A capacity change is UpdateEndpointWeightsAndCapacities, which people and target tracking call (the embedded AWS's
Application Auto Scaling evaluates its policies at the start of every pass and calls it, sagebox.box.autoscaling):
the endpoint turns Updating on the config that serves; the controller sets the new weights, starts or stops
instances to the desired counts in the background, and the endpoint is InService again once they serve (on a failed
start, at its previous count, with the reason). Scaling in takes instances out of the routes before they stop.

A serverless variant runs one instance while requests come (sagebox.box.serverless): after an idle period (box
time) it scales to zero, out of the routes first; when the gateway reports a request waiting for it, one instance
cold-starts, and the time until it is healthy is recorded as the variant's cold start.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

from sagebox.box import serverless, specs
from sagebox.box.control import describe
from sagebox.box.control.context import Context, Observed
from sagebox.box.control.fleet_state import Deployment, VariantFleet
from sagebox.box.fleet import Instance, Launcher
from sagebox.box.specs import EndpointSpec

log = logging.getLogger("sagebox.control")


class ScalingController:
    def __init__(
        self,
        ctx: Context,
        launcher: Launcher,
        healthy: Callable[[Instance, float], float],
        state_dir: Path,
        serverless_idle_s: float = serverless.DEFAULT_IDLE_S,
    ) -> None:
        """`healthy(instance, timeout_s)` waits for a started instance's /ping; the gateway's activity file is read
        from `state_dir`; a serverless variant scales to zero after `serverless_idle_s` box seconds without a
        request."""
        self._ctx = ctx
        self._launcher = launcher
        self._healthy = healthy
        self._state_dir = state_dir
        self._serverless_idle_s = serverless_idle_s

    # --- capacity ---------------------------------------------------------------------------------------------

    def reconcile(self, seen: list[Observed]) -> None:
        """Start the capacity changes that endpoints ask for and that are not under way (call with the lock held)."""
        state = self._ctx.state
        for endpoint in seen:
            name, spec = endpoint.name, endpoint.spec
            if (
                isinstance(spec, EndpointSpec)
                and endpoint.capacity_change
                and name not in state.updates
                and name not in state.resizing
                and name not in state.in_flight
            ):
                state.resizing.add(name)
                self._ctx.spawn(functools.partial(self._resize, spec), f"resize-{name}")

    def _resize(self, spec: EndpointSpec) -> None:
        """UpdateEndpointWeightsAndCapacities: new weights, and instances started or stopped to the desired counts;
        the endpoint is InService again once they serve (on a failed start, at its previous count)."""
        ctx, state = self._ctx, self._ctx.state
        failure = ""
        try:
            with state.lock:
                live = state.live.get(spec.name)
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
            ctx.records.write_routes()
            ctx.records.write_fleet()
            with state.lock:
                endpoint = ctx.current(spec.name)
                if (
                    endpoint is not None
                    and endpoint.endpoint_status == specs.UPDATING
                    and state.live.get(spec.name) is live
                ):
                    now = ctx.utc()
                    describe.serving(endpoint, live, now)
                    endpoint.failure_reason = failure or None
                    endpoint.last_modified_time = now
                    endpoint.endpoint_status = specs.IN_SERVICE
        finally:
            with state.lock:
                state.resizing.discard(spec.name)
            ctx.settle()
            ctx.wake()

    def _scale_variant(self, live: Deployment, fleet: VariantFleet, count: int) -> str:
        """One variant to `count` instances: "" when it runs them, else why it stays at its previous count."""
        ctx = self._ctx
        before = len(fleet.instances)
        if count < before:
            with ctx.state.lock:
                leaving = fleet.instances[count:]
                del fleet.instances[count:]
                fleet.desired = count
            ctx.records.write_routes()  # out of the routes before they stop
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
        with ctx.state.lock:
            fleet.instances.extend(started)
            fleet.desired = count
        self._record_scaling(live.endpoint, fleet.spec.name, before, count)
        return ""

    def _record_scaling(self, name: str, variant: str, before: int, after: int) -> None:
        log.info("endpoint %s: variant %s now runs %d instance(s) (was %d)", name, variant, after, before)
        self._ctx.state.record_scaling(name, variant, before, after)

    # --- serverless -------------------------------------------------------------------------------------------

    def scale_serverless(self) -> None:
        """Scale idle serverless variants to zero; start one whose requests wait (sagebox.box.serverless)."""
        ctx, state = self._ctx, self._ctx.state
        with state.lock:
            fleets = [(d, f) for d in state.live.values() for f in d.variants if f.spec.serverless is not None]
        if not fleets:
            return
        activity = serverless.read_activity(self._state_dir)
        now = ctx.wall()
        for deployment, fleet in fleets:
            with state.lock:
                action = serverless.decide(
                    activity.get((deployment.endpoint, fleet.spec.name)),
                    warm=not fleet.cold,
                    starting=fleet.starting,
                    warm_since=fleet.warm_since,
                    now=now,
                    idle_real_s=ctx.time.real_s(self._serverless_idle_s),
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
                ctx.records.write_routes()  # out of the routes before it stops
                ctx.records.write_fleet()
                for instance in leaving:
                    ctx.spawn(instance.stop, f"scale-to-zero-{deployment.endpoint}")
            elif action == "start":
                ctx.spawn(functools.partial(self._cold_start, deployment, fleet), f"cold-start-{deployment.endpoint}")

    def _cold_start(self, deployment: Deployment, fleet: VariantFleet) -> None:
        """One instance of a serverless variant whose requests wait; the cold start is the time until it is
        healthy (the gateway reports the wait its requests saw)."""
        ctx, state = self._ctx, self._ctx.state
        started = ctx.time.clock()
        instance = None
        try:
            instance = self._launcher.launch(deployment.endpoint, fleet.spec, 0, fleet.model_dir)
            self._healthy(instance, fleet.spec.startup_timeout_s)
        except Exception as exc:
            if instance is not None:
                instance.stop()
            reason = " ".join(str(exc).split())[:500]
            log.warning("endpoint %s: cold start of %s failed: %s", deployment.endpoint, fleet.spec.name, reason)
            with state.lock:
                fleet.starting = False
            return
        took = ctx.time.clock() - started
        with state.lock:
            if state.live.get(deployment.endpoint) is not deployment:  # deleted or replaced meanwhile
                fleet.starting = False
                gone = True
            else:
                gone = False
                fleet.instances = [instance]
                fleet.cold = fleet.starting = False
                fleet.warm_since = ctx.wall()
                fleet.cold_starts += 1
                fleet.last_cold_start_s = took
        if gone:
            instance.stop()
            return
        log.info(
            "endpoint %s: serverless variant %s cold start took %.2f s", deployment.endpoint, fleet.spec.name, took
        )
        ctx.records.write_routes()
        ctx.records.write_fleet()
