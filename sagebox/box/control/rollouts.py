"""Rollouts: a blue/green update run as SageMaker's deployment guardrails run it (sagebox.box.guardrails).

The new config's fleet is healthy beside the serving one when sagebox.box.control.deployments hands it over. From
then on every pass advances the update's `Rollout` on box time and the CloudWatch alarms now in ALARM: the route
table gives the new fleet its share of the traffic step by step (all at once, canary, linear), with a bake after
each step, and PendingDeploymentSummary says where the update stands. A rollback alarm in ALARM during a bake, or
the execution timeout, sends all traffic back to the old fleet at once and stops the new one (`RollingBack`, then
`InService` on the old config with the reason as FailureReason). After the last bake the new fleet serves alone,
the endpoint is `InService` on its new config, and the old fleet retires after the termination wait.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping

from sagebox.box import specs
from sagebox.box.control import describe
from sagebox.box.control.context import Context
from sagebox.box.control.fleet_state import Deployment, Retiring, Update
from sagebox.box.control.retirement import RetirementController
from sagebox.box.guardrails import COMPLETED, IN_PROGRESS, ROLLED_BACK, DeploymentPolicy, Rollout
from sagebox.box.specs import EndpointSpec

log = logging.getLogger("sagebox.control")


class RolloutController:
    def __init__(self, ctx: Context, retirement: RetirementController, alarms: Callable[[], Mapping[str, str]]) -> None:
        """`alarms()` names the CloudWatch alarms now in ALARM (name -> reason)."""
        self._ctx = ctx
        self._retirement = retirement
        self._alarms = alarms

    def begin(self, spec: EndpointSpec, green: Deployment, policy: DeploymentPolicy) -> None:
        """The new fleet is healthy: hand it to the guardrails, which shift traffic from the next pass on (the first
        step at once). Discarded when the endpoint changed or went away meanwhile."""
        ctx = self._ctx
        with ctx.state.lock:
            endpoint = ctx.current(spec.name)
            if endpoint is None or describe.wanted(endpoint) != spec.config_name or ctx.state.stopping:
                stale = True
            else:
                stale = False
                # The execution timeout counts from here: starting instances takes real time, which the box's time
                # scale does not shorten (a 0.01 scale would otherwise spend a 1620 s timeout on process start-up).
                rollout = Rollout(policy, green.instance_count(), requested_at=ctx.time.now())
                ctx.state.updates[spec.name] = Update(spec, green, rollout)
        if stale:
            log.info("endpoint %s changed while config %s deployed: discarding it", spec.name, spec.config_name)
            green.stop()
            return
        log.info("endpoint %s: config %s is healthy; %s", spec.name, spec.config_name, policy.describe())
        self._advance(spec.name, self._alarms())

    def advance(self) -> None:
        """Every update one step further, as box time and the alarms now say."""
        with self._ctx.state.lock:
            names = list(self._ctx.state.updates)
        if names:
            firing = dict(self._alarms())
            for name in names:
                self._advance(name, firing)

    def _advance(self, name: str, firing: Mapping[str, str]) -> None:
        ctx, state = self._ctx, self._ctx.state
        with state.lock:
            update = state.updates.get(name)
            if update is None:
                return
            step = update.rollout.advance(ctx.time.now(), firing)
            changed = step.changed or step.status != update.status
            if step.outcome != IN_PROGRESS:
                if not step.changed:
                    return  # another thread saw this update end and finishes it
                state.updates.pop(name, None)
                if step.outcome == COMPLETED and ctx.current(name) is not None:
                    # In the same step as the update leaves: traffic never returns to the old fleet meanwhile.
                    old = state.live.get(name)
                    state.live[name] = update.green
                    stop_at = update.rollout.retire_at()
                    if old is not None:
                        state.retiring.append(Retiring(old, ctx.time.now() if stop_at is None else stop_at))
            elif changed:
                update.status, update.message = step.status, step.message
                log.info("endpoint %s: %s", name, step.message)
                describe.pending(ctx.current(name), update.spec, update.green, step.status, step.message, ctx.utc())
        if step.outcome == IN_PROGRESS:
            if changed:
                ctx.records.write_routes()
                ctx.records.write_fleet()
        elif step.outcome == COMPLETED:
            self._complete(name, update)
        elif step.outcome == ROLLED_BACK:
            self._roll_back(name, update, step.message)

    def _complete(self, name: str, update: Update) -> None:
        """The new fleet serves alone (switched by `_advance`); the endpoint is InService on its config."""
        ctx, state = self._ctx, self._ctx.state
        with state.lock:
            endpoint = ctx.current(name)
        if endpoint is None or state.live.get(name) is not update.green:  # deleted meanwhile
            update.green.stop()
            return
        ctx.records.write_routes()
        with state.lock:
            describe.in_service(endpoint, update.green, ctx.utc())
            state.record_update(name, update.spec.config_name, COMPLETED, "all traffic on the new fleet")
        log.info("endpoint %s InService (config %s)", name, update.spec.config_name)
        ctx.records.write_fleet()
        ctx.settle()
        self._retirement.retire_due()

    def _roll_back(self, name: str, update: Update, reason: str) -> None:
        """All traffic back to the old fleet at once, then the new fleet stops; the endpoint is RollingBack until
        it has, then InService on its old config with the reason."""
        ctx, state = self._ctx, self._ctx.state
        config = update.spec.config_name
        with state.lock:
            state.updates.pop(name, None)
            endpoint = ctx.current(name)
            failure = f"Update to endpoint config {config} was rolled back: {reason}"
            if endpoint is not None:
                endpoint.endpoint_status = specs.ROLLING_BACK
                endpoint.failure_reason = failure
                endpoint.last_modified_time = ctx.utc()
            state.record_update(name, config, ROLLED_BACK, reason)
        log.warning("endpoint %s: %s", name, failure)
        ctx.records.write_routes()
        ctx.records.write_fleet()
        ctx.settle()
        ctx.spawn(functools.partial(self._finish_rollback, name, update), f"rollback-{name}")

    def _finish_rollback(self, name: str, update: Update) -> None:
        ctx, state = self._ctx, self._ctx.state
        update.green.stop()
        with state.lock:
            endpoint = ctx.current(name)
            live = state.live.get(name)
            if endpoint is not None and endpoint.endpoint_status == specs.ROLLING_BACK:
                endpoint.pending_deployment_summary = None
                now = ctx.utc()
                if live is not None:
                    endpoint.endpoint_config_name = live.config_name
                    describe.serving(endpoint, live, now)
                endpoint.last_modified_time = now
                endpoint.endpoint_status = specs.IN_SERVICE
        ctx.records.write_fleet()
        ctx.settle()
        ctx.wake()
