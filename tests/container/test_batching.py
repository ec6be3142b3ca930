"""MicroBatcher: lone requests run at once, concurrent ones share batches, errors reach every caller."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from container.batching import BatcherClosed, MicroBatcher

T = TypeVar("T")


class Recorder:
    """A run_batch that records its batches and, while `gate` is clear, holds them inside the "model"."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on = fail_on
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, values: list[int]) -> list[int]:
        self.batches.append(list(values))
        self.entered.set()
        if not self.gate.wait(30):
            raise TimeoutError("the test never opened the gate")
        if self.fail_on is not None and self.fail_on in values:
            raise RuntimeError("model failed")
        return [v * 10 for v in values]


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def entered(rec: Recorder) -> None:
    assert await asyncio.to_thread(rec.entered.wait, 30), "no batch reached the model"


def test_lone_request_is_dispatched_at_once_without_a_timer() -> None:
    async def main() -> None:
        rec = Recorder()
        batcher = MicroBatcher(rec, max_batch_size=8, max_wait_s=0.0)
        batcher.start()
        task = asyncio.create_task(batcher.submit([1, 2]))
        await asyncio.sleep(0)  # one loop turn: submit() has run up to its wait for the result
        assert batcher.busy and batcher.queued == 0 and batcher.stats.batches == 1
        assert await task == [10, 20]
        await batcher.close()
        assert rec.batches == [[1, 2]]

    run(main())


def test_requests_arriving_while_busy_share_the_next_batch() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.gate.clear()  # hold the first batch inside the "model"
        batcher = MicroBatcher(rec, max_batch_size=4, max_wait_s=0.0)
        batcher.start()
        first = asyncio.create_task(batcher.submit([0]))
        await entered(rec)
        others = [asyncio.create_task(batcher.submit([i])) for i in range(1, 7)]
        await asyncio.sleep(0)  # one loop turn: all six are queued behind the busy model
        assert batcher.queued == 6 and rec.batches == [[0]]
        rec.gate.set()
        results = await asyncio.gather(first, *others)
        await batcher.close()
        assert results == [[i * 10] for i in range(7)]
        assert rec.batches[0] == [0]
        assert [len(b) for b in rec.batches[1:]] == [4, 2]  # capped at max_batch_size
        assert batcher.stats.largest == 4 and batcher.stats.items == 7

    run(main())


def test_max_wait_holds_an_idle_server_until_the_batch_is_full() -> None:
    async def main() -> None:
        rec = Recorder()
        # A wait no test lives to see: only a full batch can dispatch here.
        batcher = MicroBatcher(rec, max_batch_size=2, max_wait_s=3600.0)
        batcher.start()
        first = asyncio.create_task(batcher.submit([1]))
        await asyncio.sleep(0)
        assert not batcher.busy and batcher.queued == 1  # waiting for company
        second = asyncio.create_task(batcher.submit([2]))
        assert await asyncio.gather(first, second) == [[10], [20]]
        await batcher.close()
        assert rec.batches == [[1, 2]]

    run(main())


def test_max_wait_expires_and_a_lone_request_still_runs() -> None:
    async def main() -> None:
        rec = Recorder()
        batcher = MicroBatcher(rec, max_batch_size=8, max_wait_s=0.001)
        batcher.start()
        assert await batcher.submit([1]) == [10]  # however long the timer takes, it fires
        await batcher.close()
        assert rec.batches == [[1]]

    run(main())


def test_a_cancelled_caller_leaves_the_queue() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.gate.clear()
        batcher = MicroBatcher(rec, max_batch_size=8)
        batcher.start()
        first = asyncio.create_task(batcher.submit([1]))
        await entered(rec)
        gone = asyncio.create_task(batcher.submit([2, 3]))
        kept = asyncio.create_task(batcher.submit([4]))
        await asyncio.sleep(0)
        assert batcher.queued == 3
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert batcher.queued == 1
        rec.gate.set()
        assert await asyncio.gather(first, kept) == [[10], [40]]
        await batcher.close()
        assert rec.batches == [[1], [4]]

    run(main())


def test_close_without_waiting_leaves_a_running_batch_behind() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.gate.clear()
        batcher = MicroBatcher(rec, max_batch_size=8)
        batcher.start()
        running = asyncio.create_task(batcher.submit([1]))
        await entered(rec)
        queued = asyncio.create_task(batcher.submit([2]))
        await asyncio.sleep(0)
        await batcher.close(wait=False)  # returns although the model call has not
        with pytest.raises(BatcherClosed):
            await queued
        assert not running.done()
        running.cancel()
        rec.gate.set()

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


def test_a_busy_inference_thread_takes_its_next_batch_without_the_event_loop() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.gate.clear()
        batcher = MicroBatcher(rec, max_batch_size=4)
        batcher.start()
        first = asyncio.create_task(batcher.submit([1]))
        await entered(rec)
        second = asyncio.create_task(batcher.submit([2]))
        await asyncio.sleep(0)  # queued behind the busy model
        rec.entered.clear()
        rec.gate.set()
        # The event loop is blocked here (a storm's refusals keep it as busy): the thread must go on by itself.
        assert rec.entered.wait(30), "the next batch waited for the event loop"
        assert rec.batches == [[1], [2]]
        assert await asyncio.gather(first, second) == [[10], [20]]
        await batcher.close()

    run(main())
