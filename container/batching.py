"""Micro-batching: concurrent requests' features share model calls.

One inference thread runs batches back to back. While it is busy, new features queue up and form the next
batch (up to `max_batch_size`); an idle server runs a request at once unless `max_wait_s` asks it to wait
for company. So a lone request pays no batching delay and a busy server fills its batches.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

In = TypeVar("In")
Out = TypeVar("Out")


class BatcherClosed(RuntimeError):
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


@dataclass
class _Item(Generic[In, Out]):
    value: In
    future: asyncio.Future[Out]


class MicroBatcher(Generic[In, Out]):
    def __init__(
        self, run_batch: Callable[[list[In]], Sequence[Out]], max_batch_size: int, max_wait_s: float = 0.0
    ) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        self._run_batch = run_batch
        self._max_batch_size = max_batch_size
        self._max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Item[In, Out]] = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.stats = BatchStats()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name="micro-batcher")

    async def submit(self, values: Sequence[In]) -> list[Out]:
        """Results for `values`, in order; they may share model calls with other requests' values."""
        if self._closed:
            raise BatcherClosed("the server is shutting down")
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Out]] = []
        for value in values:
            future: asyncio.Future[Out] = loop.create_future()
            self._queue.put_nowait(_Item(value, future))
            futures.append(future)
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not item.future.done():
                item.future.set_exception(BatcherClosed("the server is shutting down"))
        self._executor.shutdown(wait=True)

    async def _collect(self) -> list[_Item[In, Out]]:
        loop = asyncio.get_running_loop()
        batch = [await self._queue.get()]
        deadline = loop.time() + self._max_wait_s
        while len(batch) < self._max_batch_size:
            if not self._queue.empty():
                batch.append(self._queue.get_nowait())
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return [item for item in batch if not item.future.done()]

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            if not batch:
                continue
            self.stats.record(len(batch))
            try:
                results = await loop.run_in_executor(self._executor, self._run_batch, [i.value for i in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"batch of {len(batch)} produced {len(results)} results")
            except Exception as exc:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(exc)
                continue
            for item, result in zip(batch, results, strict=True):
                if not item.future.done():
                    item.future.set_result(result)
