"""Micro-batching: concurrent requests' features share model calls.

One inference thread runs batches back to back. While it is busy, new features queue up and form the next
batch (up to `max_batch_size`); an idle server dispatches a request at once unless `max_wait_s` asks it to
wait for company. So a lone request pays no batching delay and a busy server fills its batches.

An idle server's first batch is handed over by the event loop; a busy inference thread takes its next batch from
the queue itself as soon as a batch ends, without waiting for the event loop to come round. Under a request storm
the event loop is busy refusing (and runs niced: container/priorities.py): measured with the INT8 demo model on one
CPU and 48 clients retrying at once, handing every batch over through the loop left the model idle between batches
for as long as the loop took to get to it, and it answered fewer requests than it had CPU for. Results still go
back through the loop (one `call_soon_threadsafe` per batch). `call()` runs other work on the inference thread,
between batches: loading the model there gives inference the thread state the runtime set up at load (e.g.
denormals flushed to zero).
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
        # The queue and the busy flag are shared with the inference thread, under `_lock`.
        self._lock = threading.Lock()
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
        batch: list[_Entry[In, Out]] = []
        with self._lock:
            self._pending.extend((job, index, value) for index, value in enumerate(values))
            idle = not self._busy
            if idle and (self._max_wait_s <= 0 or len(self._pending) >= self._max_batch_size):
                batch = self._take_locked()
        if batch:
            self._cancel_timer()
            self._inbox.put(batch)
        elif idle and self._timer is None:
            self._timer = self._loop.call_later(self._max_wait_s, self._dispatch)
        try:
            return await job.future
        except asyncio.CancelledError:
            with self._lock:
                self._pending = deque(entry for entry in self._pending if entry[0] is not job)
            raise

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _dispatch(self) -> None:
        """On the event loop (the max-wait timer): hand an idle inference thread what is queued."""
        self._cancel_timer()
        with self._lock:
            batch = [] if self._busy or self._closed else self._take_locked()
        if batch:
            self._inbox.put(batch)

    def _take_locked(self) -> list[_Entry[In, Out]]:
        """Up to max_batch_size queued values whose callers still wait; marks the thread busy if any."""
        batch: list[_Entry[In, Out]] = []
        while self._pending and len(batch) < self._max_batch_size:
            entry = self._pending.popleft()
            if not entry[0].future.done():
                batch.append(entry)
        if batch:
            self._busy = True
            self.stats.record(len(batch))
        return batch

    def _next_batch(self) -> list[_Entry[In, Out]] | None:
        """On the inference thread, after a batch or a call: the next batch straight from the queue, or None (the
        thread is idle then, and the event loop hands it the next)."""
        with self._lock:
            batch = [] if self._closed else self._take_locked()
            if not batch:
                self._busy = False
        return batch or None

    def _work(self) -> None:
        """The inference thread: run each batch, hand results back to the event loop, take the next."""
        batch: list[_Entry[In, Out]] | None = None
        while True:
            if batch is None:  # idle: the event loop hands over the next batch, or a call
                item = self._inbox.get()
                if item is None:
                    return
                if isinstance(item, _Call):
                    self._run_call(item)
                    continue
                batch = item
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
            # Still busy, so the event loop hands nothing over: calls (or the stop) waiting run between batches,
            # then the thread takes its next batch from the queue itself.
            batch = None
            while batch is None and not self._inbox.empty():
                item = self._inbox.get()
                if item is None:
                    return
                if isinstance(item, _Call):
                    self._run_call(item)
                else:
                    batch = item
            if batch is None:
                batch = self._next_batch()

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

    async def close(self, wait: bool = True) -> None:
        """Refuse new work, fail queued work, and stop the inference thread; `wait=False` does not wait for a
        batch still running there (the thread is a daemon: a process that exits does not wait for it either)."""
        self._closed = True
        self._cancel_timer()
        with self._lock:
            pending, self._pending = self._pending, deque()
        for job, _, _ in pending:
            if not job.future.done():
                job.future.set_exception(BatcherClosed("the server is shutting down"))
        if self._thread.is_alive():
            self._inbox.put(None)
            if wait:
                await asyncio.to_thread(self._thread.join)
