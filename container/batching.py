"""Micro-batching: concurrent requests' features share model calls.

One inference thread runs batches back to back. While it is busy, new features queue up and form the next
batch (up to `max_batch_size`); an idle server dispatches a request at once unless `max_wait_s` asks it to
wait for company. So a lone request pays no batching delay and a busy server fills its batches.

All bookkeeping runs as event-loop callbacks (no consumer task): a request costs one future and one hop to
the inference thread and back. `call()` runs other work on the inference thread, between batches: loading the
model there gives inference the thread state the runtime set up at load (e.g. denormals flushed to zero).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from container.errors import ContainerError

In = TypeVar("In")
Out = TypeVar("Out")
T = TypeVar("T")


class BatcherClosed(ContainerError, RuntimeError):
    """The batcher is shutting down and takes no more work."""


@dataclass
class BatchStats:
    batches: int = 0
    items: int = 0
    largest: int = 0
    sizes: dict[int, int] = field(default_factory=dict)

    def record(self, size: int) -> None:
        self.batches += 1
        self.items += size
        self.largest = max(self.largest, size)
        self.sizes[size] = self.sizes.get(size, 0) + 1


class _Job(Generic[In, Out]):
    """One caller's values; its future resolves when every value has a result."""

    __slots__ = ("future", "remaining", "results")

    def __init__(self, future: asyncio.Future[list[Out]], size: int) -> None:
        self.future = future
        self.results: list[Out | None] = [None] * size
        self.remaining = size


_Entry = tuple[_Job[In, Out], int, In]


@dataclass
class _Call:
    """A function to run on the inference thread, and the future that gets its result."""

    fn: Callable[[], object]
    future: asyncio.Future[object]


class MicroBatcher(Generic[In, Out]):
    def __init__(
        self, run_batch: Callable[[list[In]], Sequence[Out]], max_batch_size: int, max_wait_s: float = 0.0
    ) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        self._run_batch = run_batch
        self._max_batch_size = max_batch_size
        self._max_wait_s = max_wait_s
        self._pending: deque[_Entry[In, Out]] = deque()
        self._busy = False
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: queue.SimpleQueue[list[_Entry[In, Out]] | _Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="inference", daemon=True)
        self.stats = BatchStats()

    @property
    def busy(self) -> bool:
        """A batch is on the inference thread (running, or about to)."""
        return self._busy

    @property
    def queued(self) -> int:
        """Values waiting for the next batch."""
        return len(self._pending)

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._thread.start()

    async def call(self, fn: Callable[[], T]) -> T:
        """fn() run on the inference thread (after any batch already running there)."""
        if self._closed or self._loop is None:
            raise BatcherClosed("the server is shutting down")
        future: asyncio.Future[object] = self._loop.create_future()
        self._inbox.put(_Call(fn, future))
        return await future  # type: ignore[return-value]  # the future holds fn's result

    async def submit(self, values: Sequence[In]) -> list[Out]:
        """Results for `values`, in order; they may share model calls with other requests' values."""
        if self._closed or self._loop is None:
            raise BatcherClosed("the server is shutting down")
        if not values:
            return []
        job: _Job[In, Out] = _Job(self._loop.create_future(), len(values))
        self._pending.extend((job, index, value) for index, value in enumerate(values))
        if not self._busy:
            if self._max_wait_s > 0 and len(self._pending) < self._max_batch_size:
                if self._timer is None:
                    self._timer = self._loop.call_later(self._max_wait_s, self._dispatch)
            else:
                self._dispatch()
        try:
            return await job.future
        except asyncio.CancelledError:
            self._pending = deque(entry for entry in self._pending if entry[0] is not job)
            raise

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._busy or not self._pending:
            return
        batch: list[_Entry[In, Out]] = []
        while self._pending and len(batch) < self._max_batch_size:
            entry = self._pending.popleft()
            if not entry[0].future.done():
                batch.append(entry)
        if not batch:
            return
        self._busy = True
        self.stats.record(len(batch))
        self._inbox.put(batch)

    def _work(self) -> None:
        """The inference thread: run each batch, hand results back to the event loop."""
        while True:
            batch = self._inbox.get()
            if batch is None:
                return
            if isinstance(batch, _Call):
                self._run_call(batch)
                continue
            try:
                results = self._run_batch([value for _, _, value in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"batch of {len(batch)} produced {len(results)} results")
                outcome: Sequence[Out] | BaseException = results
            except Exception as exc:
                outcome = exc
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._finish, batch, outcome)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                return

    def _run_call(self, call: _Call) -> None:
        try:
            result, error = call.fn(), None
        except Exception as exc:
            result, error = None, exc
        assert self._loop is not None

        def settle() -> None:
            if call.future.done():
                return
            if error is not None:
                call.future.set_exception(error)
            else:
                call.future.set_result(result)

        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            self._loop.call_soon_threadsafe(settle)

    def _finish(self, batch: list[_Entry[In, Out]], outcome: Sequence[Out] | BaseException) -> None:
        self._busy = False
        for position, (job, index, _) in enumerate(batch):
            if job.future.done():
                continue
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
                continue
            job.results[index] = outcome[position]
            job.remaining -= 1
            if job.remaining == 0:
                job.future.set_result(job.results)  # type: ignore[arg-type]  # every slot is filled now
        if not self._closed:
            self._dispatch()

    async def close(self, wait: bool = True) -> None:
        """Refuse new work, fail queued work, and stop the inference thread; `wait=False` does not wait for a
        batch still running there (the thread is a daemon: a process that exits does not wait for it either)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for job, _, _ in self._pending:
            if not job.future.done():
                job.future.set_exception(BatcherClosed("the server is shutting down"))
        self._pending.clear()
        if self._thread.is_alive():
            self._inbox.put(None)
            if wait:
                await asyncio.to_thread(self._thread.join)
