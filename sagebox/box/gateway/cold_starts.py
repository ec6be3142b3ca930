"""The gateway's side of serverless variants (sagebox.box.serverless): concurrency, and waiting for a cold start.

A serverless variant serves at most its MaxConcurrency invocations at once (`admit` refuses the next: the caller
answers 429). A request to a variant scaled to zero waits: the gateway writes that a request waits into the
activity file, which the control plane reads to start an instance, and polls the route table until the variant has a
healthy instance again (or its start-up timeout passes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from sagebox.box import serverless
from sagebox.box.routes import RouteTable, VariantRoute


class ColdStarts:
    def __init__(
        self,
        table: RouteTable,
        state_dir: Path,
        now: Callable[[], float],
        timer: Callable[[], float],
        poll_s: float,
    ) -> None:
        """`now` stamps the activity file (epoch seconds), `timer` bounds a wait, the route table is polled every
        `poll_s` while a request waits."""
        self._table = table
        self._state_dir = state_dir
        self._timer = timer
        self._poll_s = poll_s
        self.activity = serverless.ActivityTracker(now)

    def admit(self, key: serverless.Key, limit: int) -> bool:
        return self.activity.admit(key, limit)

    def release(self, key: serverless.Key) -> None:
        self.activity.release(key)

    def write_activity(self) -> None:
        serverless.write_activity(self._state_dir, self.activity.snapshot())

    async def warm_variant(self, name: str, variant: VariantRoute, failed: str | None = None) -> VariantRoute | None:
        """A serverless variant with an instance: at once if it has one, else after the control plane's cold
        start (None: the endpoint went away, or the start took longer than the variant's start-up timeout). An
        instance `failed` to answer is not waited for again."""

        def ready(found: VariantRoute) -> bool:
            return bool(found.urls) and not found.cold and failed not in found.urls

        if ready(variant):
            return variant
        key = (name, variant.name)
        self.activity.wait_begin(key)
        self.write_activity()  # the control plane starts the instance when it reads that a request waits
        deadline = self._timer() + variant.startup_timeout_s
        try:
            while self._timer() < deadline:
                route = self._table.get(name)
                current = route.variant(variant.name) if route else None
                if current is None:
                    return None
                if ready(current):
                    return current
                await asyncio.sleep(self._poll_s)
            return None
        finally:
            self.activity.wait_end(key)
