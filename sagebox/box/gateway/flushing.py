"""The gateway's once-a-second flush: what the request path gathered, written and published off it.

The request path only appends (invocations measured, shadow pairs recorded, serverless activity noted, data-capture
records sampled); the flush drains all of it every `flush_s`: the activity file the control plane reads for cold
starts, the shadow log, the metric datums (with the async backlog, read at flush time) and the captured data in S3.
Blocking writes run in the loop's executor so that no request waits on a file or on the embedded AWS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagebox.box import async_inference as aio
from sagebox.box import data_capture, shadow
from sagebox.box.gateway.cold_starts import ColdStarts
from sagebox.box.gateway.metering import Meter, MetricsSink
from sagebox.box.gateway.shadowing import Mirror

log = logging.getLogger("sagebox.runtime")


class Flusher:
    def __init__(
        self,
        state_dir: Path,
        meter: Meter,
        sink: MetricsSink,
        backlog: Callable[[], list[dict[str, Any]]],
        cold: ColdStarts,
        mirror: Mirror,
        capture: data_capture.Capturer,
        store: aio.AsyncStore,
        flush_s: float,
    ) -> None:
        """`backlog` gives the asynchronous endpoints' backlog datums at the moment of the flush."""
        self._state_dir = state_dir
        self._meter = meter
        self._sink = sink
        self._backlog = backlog
        self._cold = cold
        self._mirror = mirror
        self._capture = capture
        self._store = store
        self._flush_s = flush_s
        self._stopping = asyncio.Event()

    async def flush(self) -> None:
        self._meter.refresh_resolution()  # box time: one box second, as the embedded AWS says (it may start later)
        loop = asyncio.get_running_loop()
        if self._cold.activity.changed:
            self._cold.write_activity()
        taken = self._mirror.take_records()
        if taken:
            await loop.run_in_executor(None, shadow.append, self._state_dir, taken)
        datums = self._meter.recorder.drain() + self._backlog() + self._meter.take_extra()
        if datums:
            await loop.run_in_executor(None, self._sink.publish, datums)
        for captured in self._capture.drain():
            try:
                await loop.run_in_executor(
                    None, self._store.write, captured.bucket, captured.key, captured.body, "application/jsonl"
                )
            except Exception as exc:  # as on SageMaker, a capture that cannot be written never fails an invocation
                log.warning("data capture to s3://%s/%s failed: %s", captured.bucket, captured.key, exc)

    async def run(self) -> None:
        """Flush every `flush_s` until `stop`."""
        # Stopped by an event, never cancelled: a flush drains what it publishes first, so a cancel that lands
        # while it waits on the publisher would lose that second's datums and shadow records (seen in CI: a
        # gateway shut down right after a shadow pair was written published no Invocations at all).
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._flush_s)
            if self._stopping.is_set():
                return
            try:
                await self.flush()
            except Exception:  # never let metrics stop the gateway
                log.exception("publishing invocation metrics failed")

    def stop(self) -> None:
        """`run` returns after the flush under way, if any (the caller's last `flush` publishes the rest)."""
        self._stopping.set()
