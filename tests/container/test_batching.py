"""MicroBatcher: lone requests run at once, concurrent ones share batches, errors reach every caller."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from container.batching import BatcherClosed, MicroBatcher

T = TypeVar("T")


class Recorder:
    def __init__(self, delay: float = 0.0, fail_on: int | None = None) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, values: list[int]) -> list[int]:
        self.gate.wait(5)
        self.batches.append(list(values))
        time.sleep(self.delay)
        if self.fail_on is not None and self.fail_on in values:
            raise RuntimeError("model failed")
        return [v * 10 for v in values]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def test_lone_request_runs_immediately_without_waiting() -> None:
    async def main() -> float:
        rec = Recorder()
        batcher = MicroBatcher(rec, max_batch_size=8, max_wait_s=0.0)
        batcher.start()
        started = time.perf_counter()
        assert await batcher.submit([1, 2]) == [10, 20]
        elapsed = time.perf_counter() - started
        await batcher.close()
        assert rec.batches == [[1, 2]]
        return elapsed

    assert run(main()) < 0.1


def test_requests_arriving_while_busy_share_the_next_batch() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.gate.clear()  # hold the first batch inside the "model"
        batcher = MicroBatcher(rec, max_batch_size=4, max_wait_s=0.0)
        batcher.start()
        first = asyncio.create_task(batcher.submit([0]))
        await asyncio.sleep(0.05)
        others = [asyncio.create_task(batcher.submit([i])) for i in range(1, 7)]
        await asyncio.sleep(0.05)
        rec.gate.set()
        results = await asyncio.gather(first, *others)
        await batcher.close()
        assert results == [[i * 10] for i in range(7)]
        assert rec.batches[0] == [0]
        assert [len(b) for b in rec.batches[1:]] == [4, 2]  # capped at max_batch_size
        assert batcher.stats.largest == 4 and batcher.stats.items == 7

    run(main())


def test_max_wait_gathers_company_for_an_idle_server() -> None:
    async def main() -> None:
        rec = Recorder()
        batcher = MicroBatcher(rec, max_batch_size=8, max_wait_s=0.2)
        batcher.start()
        first = asyncio.create_task(batcher.submit([1]))
        await asyncio.sleep(0.05)
        second = asyncio.create_task(batcher.submit([2]))
        assert await asyncio.gather(first, second) == [[10], [20]]
        await batcher.close()
        assert rec.batches == [[1, 2]]

    run(main())


def test_a_failing_batch_fails_its_callers_and_the_batcher_goes_on() -> None:
    async def main() -> None:
        rec = Recorder(fail_on=3)
        batcher = MicroBatcher(rec, max_batch_size=8)
        batcher.start()
        with pytest.raises(RuntimeError, match="model failed"):
            await batcher.submit([3])
        assert await batcher.submit([4]) == [40]
        await batcher.close()
        with pytest.raises(BatcherClosed):
            await batcher.submit([5])

    run(main())


def test_call_runs_on_the_inference_thread_and_reports_errors() -> None:
    async def main() -> None:
        seen: list[str] = []

        def record_thread(values: list[int]) -> list[int]:
            seen.append(threading.current_thread().name)
            return values

        batcher = MicroBatcher(record_thread, max_batch_size=4)
        batcher.start()
        loaded_on = await batcher.call(lambda: threading.current_thread().name)
        await batcher.submit([1])
        with pytest.raises(ValueError, match="cannot load"):
            await batcher.call(lambda: (_ for _ in ()).throw(ValueError("cannot load")))
        assert await batcher.submit([2]) == [2]  # a failed call leaves the thread serving
        await batcher.close()
        assert loaded_on == seen[0] == seen[1] == "inference"
        assert loaded_on != threading.current_thread().name
        with pytest.raises(BatcherClosed):
            await batcher.call(lambda: None)

    run(main())
