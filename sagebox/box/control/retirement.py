"""Retirement: fleets that no longer serve are stopped, out of the routes first.

A deleted endpoint's fleets (its live one, an update's new one, old ones still waiting) leave the route table before
DeleteEndpoint answers, as on SageMaker nothing reaches a deleted endpoint, and stop in the background: each
instance gets SageMaker's SIGTERM grace. An endpoint that disappeared without a notification is found by the next
pass and retired the same way. After an update completes, the old fleet stops once its termination wait (box time)
has passed (sagebox.box.control.rollouts puts it in `retiring`). When the box exits, every fleet stops at once.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterable

from sagebox.box.control.context import Context
from sagebox.box.control.fleet_state import Deployment

log = logging.getLogger("sagebox.control")


class RetirementController:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def deleted(self, endpoint: str) -> None:
        """DeleteEndpoint: out of the routes now, stopped in the background (a shutdown meanwhile stops them too)."""
        state = self._ctx.state
        with state.lock:
            removed = state.forget(endpoint)
            state.deleting += removed
        if removed:
            self._ctx.records.write_routes()
            for deployment in removed:
                self._ctx.spawn(functools.partial(self.retire, deployment), f"retire-{endpoint}")

    def take_gone(self, endpoints: Iterable[str]) -> list[Deployment]:
        """The fleets of endpoints that no longer exist, taken out of the state (call with the lock held; then
        `retire_taken` outside it)."""
        state = self._ctx.state
        present = set(endpoints)
        gone = {name for name in [*state.live, *state.updates] if name not in present}
        return [d for name in gone for d in state.forget(name)]

    def retire_taken(self, removed: list[Deployment]) -> None:
        """Fleets `take_gone` took: out of the routes, then stopped (in this pass: they are few and rare)."""
        if removed:
            self._ctx.records.write_routes()
        for deployment in removed:
            self.retire(deployment)

    def retire_due(self) -> None:
        """Stop the old fleets whose termination wait has passed (in the background: SIGTERM grace)."""
        state = self._ctx.state
        now = self._ctx.time.now()
        with state.lock:
            due = [r for r in state.retiring if r.stop_at <= now]
            state.retiring = [r for r in state.retiring if r.stop_at > now]
        for leaving in due:
            self._ctx.spawn(functools.partial(self.retire, leaving.deployment), f"retire-{leaving.deployment.endpoint}")

    def retire(self, deployment: Deployment) -> None:
        log.info("endpoint %s: stopping the instances of config %s", deployment.endpoint, deployment.config_name)
        deployment.stop()
        state = self._ctx.state
        with state.lock:
            state.deleting = [d for d in state.deleting if d is not deployment]
        self._ctx.records.write_fleet()

    def stop_all(self) -> None:
        """The box exits: every fleet stops (SIGTERM, then SIGKILL after SageMaker's 30 s), all at once, and from now
        on no pass and no deployment finishing in the background starts or keeps another (the state is stopping)."""
        state = self._ctx.state
        with state.lock:
            fleets = state.take_all()
        threads = [threading.Thread(target=d.stop) for d in fleets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._ctx.records.write_routes()
        self._ctx.records.write_fleet()
