"""Shadow variants in the gateway (sagebox.box.shadow): each sampled request's copy, sent beside production's call.

A copy never delays production's answer and is never returned: it is sent at once, and its answer is recorded
beside production's once both are in (the shadow log that `sagebox box shadow` reports from). At most
`max_in_flight` copies per endpoint are in flight; past that a copy is dropped (and recorded as dropped), never
queued, so a slow or failing shadow cannot pile up work on the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from sagebox.box import shadow
from sagebox.box.gateway.forwarding import Forwarder
from sagebox.box.gateway.metering import Meter, outcome_of
from sagebox.box.gateway.picking import Choice, Picker
from sagebox.box.routes import Route, VariantRoute

# Copies of requests in flight to one endpoint's shadow at once; more are dropped (and counted), never queued.
MAX_SHADOW_IN_FLIGHT = 16

Production = asyncio.Future[tuple[str, int, float, bytes]]  # production's (variant, status, latency, body)


class Mirror:
    def __init__(
        self,
        pick: Picker,
        forwarder: Forwarder,
        meter: Meter,
        now: Callable[[], float],
        timer: Callable[[], float],
        max_in_flight: int = MAX_SHADOW_IN_FLIGHT,
    ) -> None:
        self._pick = pick
        self._forwarder = forwarder
        self._meter = meter
        self._now = now
        self._timer = timer
        self._max_in_flight = max_in_flight
        self._in_flight: dict[str, int] = {}
        self._records: list[shadow.ShadowRecord] = []
        self._background: set[asyncio.Task[Any]] = set()

    def send(
        self, route: Route, config: str, copies: list[VariantRoute], body: bytes, headers: dict[str, str]
    ) -> Production:
        """Send each shadow its copy now, beside the production call; record both once both answered. The
        returned future takes production's (variant, status, latency, body); it never delays production."""
        production: Production = asyncio.get_running_loop().create_future()
        for copy in copies:
            if self._in_flight.get(route.endpoint, 0) >= self._max_in_flight:
                task = asyncio.ensure_future(self._record_dropped(route.endpoint, production))
            else:
                self._in_flight[route.endpoint] = self._in_flight.get(route.endpoint, 0) + 1
                task = asyncio.ensure_future(self._shadow_call(route, config, copy, body, headers, production))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return production

    def take_records(self) -> list[shadow.ShadowRecord]:
        """The pairs recorded since the last call (the flush appends them to the shadow log)."""
        taken = list(self._records)
        del self._records[: len(taken)]
        return taken

    async def finish(self, timeout_s: float = 5) -> None:
        """Let the copies in flight end (each at most `timeout_s`), so that their records are flushed."""
        for task in list(self._background):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, timeout_s)

    async def _record_dropped(self, endpoint: str, production: Production) -> None:
        variant, status, latency, out = await production
        side = shadow.Side(variant, status, round(latency * 1000, 3), shadow.answer_of(status, out))
        self._records.append(shadow.ShadowRecord(self._now(), endpoint, side, None))

    async def _shadow_call(
        self,
        route: Route,
        config: str,
        copy: VariantRoute,
        body: bytes,
        headers: dict[str, str],
        production: Production,
    ) -> None:
        started = self._timer()
        try:
            result = await self._forwarder.forward(self._pick.url(route, copy), body, headers)
        finally:
            self._in_flight[route.endpoint] -= 1
        status = result.status
        self._meter.measured(
            Choice(config, copy, len(copy.urls)), route.endpoint, started, outcome_of(status), result.model_s
        )
        out = result.response.body if result.response is not None else b""
        mine = shadow.Side(copy.name, status, round((result.model_s or 0.0) * 1000, 3), shadow.answer_of(status, out))
        variant, p_status, p_latency, p_body = await production
        theirs = shadow.Side(variant, p_status, round(p_latency * 1000, 3), shadow.answer_of(p_status, p_body))
        self._records.append(shadow.ShadowRecord(self._now(), route.endpoint, theirs, mine))
