"""Health: an instance that dies, or fails its health checks, is replaced from the same model data.

As SageMaker replaces an unhealthy instance: every pass looks at each instance of a serving fleet (and of an
update's new fleet); one whose process or container exited is replaced at once, with the last line of its log as the
reason. Every `probe_every_s` (real seconds) a live instance also gets a /ping health check; `unhealthy_after` failed
checks in a row stop and replace it, and a check that passes resets the count. The replacement starts at the same
position of its variant, takes no traffic until healthy, and counts as one of the variant's restarts in fleet.json.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable

from sagebox.box import specs
from sagebox.box.control.context import Context, Observed
from sagebox.box.control.fleet_state import Deployment, VariantFleet
from sagebox.box.fleet import Instance, Launcher
from sagebox.box.specs import SpecError

log = logging.getLogger("sagebox.control")


class HealthController:
    def __init__(
        self,
        ctx: Context,
        launcher: Launcher,
        healthy: Callable[[Instance, float], float],
        probe: Callable[[Instance], bool],
        probe_every_s: float = 5.0,
        unhealthy_after: int = 3,
    ) -> None:
        """`probe(instance)` is one health check of a serving instance; `healthy(instance, timeout_s)` waits for a
        replacement's /ping."""
        self._ctx = ctx
        self._launcher = launcher
        self._healthy = healthy
        self._probe = probe
        self._probe_every_s = probe_every_s
        self._unhealthy_after = unhealthy_after
        self._last_probe = -float("inf")
        self._probing = False  # whether this pass health-checks (start_pass decides, once for every fleet)
        self._pass_started = -float("inf")
        self._failed_probes: dict[int, int] = {}  # id(instance) -> failed health checks in a row

    def start_pass(self) -> None:
        """Called once at the start of every pass: whether this pass health-checks, decided once so that every
        serving fleet of every endpoint (and an update's new fleet) is checked in the same pass. (Deciding it per
        fleet, as the reconciler once did, checked only the first fleet of a pass: the others never were.)"""
        self._pass_started = self._ctx.time.clock()
        self._probing = self._pass_started - self._last_probe >= self._probe_every_s

    def reconcile(self, seen: list[Observed]) -> None:
        """Heal the fleets that serve each endpoint: the live one (unless the endpoint is still being created) and
        an update's new one (call with the lock held, after this pass's deployments started)."""
        updates = self._ctx.state.updates
        for endpoint in seen:
            if isinstance(endpoint.spec, SpecError):
                if endpoint.live is not None:
                    self._heal(endpoint.live)
                continue
            if endpoint.live is not None and endpoint.spec.status != specs.CREATING:
                self._heal(endpoint.live)
            if endpoint.name in updates:
                self._heal(updates[endpoint.name].green)

    def _heal(self, deployment: Deployment) -> None:
        probing = self._probing
        if probing:  # the next checks are due `probe_every_s` after the first pass that had a fleet to check
            self._last_probe = self._pass_started
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
                self._replace(deployment, fleet, position, instance, why)

    def _replace(
        self, deployment: Deployment, fleet: VariantFleet, position: int, instance: Instance, why: str
    ) -> None:
        log.warning(
            "endpoint %s: instance %s of %s %s; replacing it", deployment.endpoint, instance.label, fleet.spec.name, why
        )
        fleet.restarts += 1
        replacement = self._launcher.launch(deployment.endpoint, fleet.spec, position, fleet.model_dir)
        fleet.instances[position] = replacement
        self._ctx.records.write_routes()  # the failed instance takes no more traffic
        self._ctx.spawn(
            functools.partial(self._await_replacement, deployment, fleet, replacement),
            f"replace-{deployment.endpoint}",
        )

    def _await_replacement(self, deployment: Deployment, fleet: VariantFleet, instance: Instance) -> None:
        with contextlib.suppress(Exception):
            self._healthy(instance, fleet.spec.startup_timeout_s)
            log.info("endpoint %s: replacement %s is healthy", deployment.endpoint, instance.label)
        self._ctx.records.write_routes()
        self._ctx.records.write_fleet()
