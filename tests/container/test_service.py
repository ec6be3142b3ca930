"""InferenceService without HTTP: model lifecycle, answers, admission control, and work dropped when its caller is gone.

Every ordering is explicit: the model blocks on a gate the test opens, and time moves only when the test
advances the clock.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from container import payload
from container.admission import Overloaded, TooLarge
from container.handlers import HandlerError
from container.manifest import ManifestError
from container.predictor import CallObserver, Predictor
from container.privileges import Identity
from container.qa import Feature
from container.service import (
    FAILED_REASON,
    REFUSED_REASON,
    DeadlineExceeded,
    InferenceService,
    ModelStatus,
    NotReady,
    TooManyWindows,
)
from container.tasks.question_answering import Question
from tests.container.fakes import BUCKETS, FixedCost, GateHandler, ManualClock, make_service, settings, wait_for

T = TypeVar("T")
CONTEXT = "The Amazon rainforest covers much of the Amazon basin of South America."
SHORT = payload.Request([Question("Which basin does the rainforest cover?", CONTEXT)], batch=False)
# ~500 word pieces: two 384-token windows, each its own model call (512 padded tokens per call).
LONG = payload.Request([Question("Which word?", " ".join(f"word{i}" for i in range(200)))], batch=False)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def started(service: InferenceService, handler: GateHandler) -> InferenceService:
    """The service after its load (and warm-up), with the gate's record cleared."""
    await service.start()
    handler.calls.clear()
    handler.entered.clear()
    return service


# --- lifecycle ---------------------------------------------------------------------------------------------------


def test_loading_then_ready_and_root_is_dropped_right_after_the_load() -> None:
    handler = GateHandler()
    seen: list[tuple[str, ModelStatus, int]] = []
    service = make_service(handler, drop=lambda user: seen.append((user, service.status, len(handler.calls))))

    async def main() -> None:
        assert service.status is ModelStatus.LOADING
        with pytest.raises(NotReady, match="loading"):
            service.check_ready()
        await service.start()
        assert service.status is ModelStatus.READY
        service.check_ready()
        await service.close()

    run(main())
    # Once, as the configured user, after the warm-up's one call per bucket and before the service became ready.
    assert seen == [("sagebox", ModelStatus.LOADING, len(BUCKETS))]


class HelperProcessHandler(GateHandler):
    """A handler that runs model code in processes of its own (as a tensor-parallel neuron model does)."""

    def __init__(self, refuse: bool = False) -> None:
        super().__init__()
        self.refuse = refuse
        self.became: list[tuple[int, int, str]] = []
        self.closed = False

    def serve_as(self, uid: int, gid: int) -> None:
        if self.refuse:
            raise HandlerError("rank 1 failed while becoming uid 10001: PermissionError: [Errno 1] not permitted")
        self.became.append((uid, gid, threading.current_thread().name))

    def close(self) -> None:
        self.closed = True


def test_helper_processes_follow_the_server_to_the_service_user_on_the_inference_thread() -> None:
    handler = HelperProcessHandler()
    service = make_service(handler, drop=lambda user: Identity(10001, 10002, user, "/home/sagebox"))

    async def main() -> None:
        await service.start()
        assert service.status is ModelStatus.READY
        await service.close()

    run(main())
    assert [(uid, gid) for uid, gid, _ in handler.became] == [(10001, 10002)]
    assert handler.became[0][2] != threading.main_thread().name  # the inference thread owns the handler


def test_helper_processes_stay_as_they_are_when_the_server_changed_nothing() -> None:
    handler = HelperProcessHandler()
    service = make_service(handler, drop=lambda user: None)  # not root, or no service user: no drop
    run(service.start())
    assert service.status is ModelStatus.READY
    assert handler.became == []
    run(service.close())


def test_helper_processes_that_cannot_drop_root_fail_the_model(caplog: pytest.LogCaptureFixture) -> None:
    handler = HelperProcessHandler(refuse=True)
    service = make_service(handler, drop=lambda user: Identity(10001, 10001, user, "/home/sagebox"))
    with caplog.at_level(logging.ERROR, logger="sagebox.server"):
        run(service.start())
    # Never serve with model code left running as root: the model is unavailable, its processes are stopped.
    assert service.status is ModelStatus.FAILED
    assert service.reason == FAILED_REASON
    assert handler.closed
    assert any("becoming uid 10001" in r.getMessage() for r in caplog.records)
    with pytest.raises(NotReady):
        service.check_ready()


def test_a_refused_model_tells_clients_a_short_reason_and_logs_the_detail(caplog: pytest.LogCaptureFixture) -> None:
    detail = "model is tampered: sha256 mismatch for /opt/ml/model/weights/model.onnx"

    def refuse(on_call: CallObserver) -> Predictor:
        raise ManifestError(detail)

    drops: list[ModelStatus] = []
    service = InferenceService(settings(), loader=refuse, drop_privileges=lambda user: drops.append(service.status))
    with caplog.at_level(logging.INFO, logger="sagebox.server"):
        run(service.start())
    assert service.status is ModelStatus.FAILED
    assert service.reason == REFUSED_REASON
    with pytest.raises(NotReady) as err:
        service.check_ready()
    assert "sha256" not in str(err.value) and "/opt/ml" not in str(err.value)
    assert f"model refused: {detail}" in [r.getMessage() for r in caplog.records]
    assert drops == [ModelStatus.FAILED]  # privileges still drop, right after the load attempt


def test_a_model_that_fails_to_load_logs_one_line_with_the_detail(caplog: pytest.LogCaptureFixture) -> None:
    def broken(on_call: CallObserver) -> Predictor:
        raise OSError("libonnxruntime.so: cannot open shared object file\n  at /secret/venv/lib")

    service = InferenceService(settings(), loader=broken, drop_privileges=lambda user: None)
    with caplog.at_level(logging.INFO, logger="sagebox.server"):
        run(service.start())
    assert service.status is ModelStatus.FAILED and service.reason == FAILED_REASON
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model failed to load:")]
    assert lines == [
        "model failed to load: OSError: libonnxruntime.so: cannot open shared object file at /secret/venv/lib"
    ]
    assert any(r.exc_info for r in caplog.records)  # the traceback of an unexpected error stays in the log too


def test_warm_up_calls_reach_the_cost_estimate() -> None:
    handler = GateHandler()
    cost = FixedCost(0.0)
    run(make_service(handler, cost=cost).start())
    assert [(bucket, batch) for bucket, batch, _ in cost.observed] == [(b, 1) for b in BUCKETS]


# --- answering -----------------------------------------------------------------------------------------------------


def test_answers_are_spans_of_their_context_in_order() -> None:
    handler = GateHandler()

    async def main() -> None:
        service = await started(make_service(handler), handler)
        other = Question("Where?", "Manaus lies on the Rio Negro.")
        batch = payload.Request([SHORT.questions[0], other], batch=True)
        both = await service.answer(batch, service.clock.now())
        alone = [await service.answer(payload.Request([q], False), service.clock.now()) for q in batch.questions]
        assert both == [a[0] for a in alone]
        for question, answer in zip(batch.questions, both, strict=True):
            assert answer.text and question.context[answer.start : answer.end] == answer.text
        await service.close()

    run(main())


def test_too_many_windows_and_too_long_questions_are_refused_before_the_model() -> None:
    handler = GateHandler()

    async def main() -> None:
        service = await started(make_service(handler, SAGEBOX_MAX_FEATURES_PER_REQUEST="1"), handler)
        with pytest.raises(TooManyWindows, match="2 model windows; the limit is 1"):
            await service.answer(LONG, service.clock.now())
        await service.close()

    run(main())
    assert handler.calls == []


def test_requests_arriving_while_the_model_is_busy_share_one_call() -> None:
    handler = GateHandler()

    async def main() -> dict[str, Any]:
        service = await started(make_service(handler), handler)
        handler.open.clear()
        first = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await wait_for(handler.entered)  # the first request holds the model
        rest = [asyncio.create_task(service.answer(SHORT, service.clock.now())) for _ in range(7)]
        await asyncio.sleep(0)  # one loop turn: each task runs up to its wait for the batcher
        assert service.stats()["queued_features"] == 7
        handler.open.set()
        answers = await asyncio.gather(first, *rest)
        assert len({(a[0].start, a[0].end) for a in answers}) == 1
        stats = service.stats()
        await service.close()
        return stats

    stats = run(main())
    assert [len(ids) for ids in handler.calls] == [1, 7]
    assert stats["largest_batch"] == 7


# --- admission and dropped work -----------------------------------------------------------------------------------


def test_work_that_cannot_finish_in_time_is_refused_at_once() -> None:
    handler = GateHandler()
    # 3 s of model time per window and a 10 s timeout, of which queued work may fill 3/4 (ADMIT_SHARE): two
    # requests fit in the queue, a third does not.
    service = make_service(handler, cost=FixedCost(3.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        await started(service, handler)
        handler.open.clear()
        first = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await wait_for(handler.entered)
        second = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await asyncio.sleep(0)
        assert service.admission.backlog_s == 6.0
        with pytest.raises(Overloaded, match="at capacity"):
            await service.answer(SHORT, service.clock.now())  # refused without waiting for the gate
        assert len(handler.calls) == 1
        handler.open.set()
        await asyncio.gather(first, second)
        assert service.admission.backlog_s == 0.0
        assert await service.answer(SHORT, service.clock.now())  # room again
        await service.close()

    run(main())
    assert service.stats()["admission"]["refused_busy"] == 1
    assert len(handler.calls) == 3  # the refused request never reached the model


def test_a_request_too_big_for_the_timeout_is_refused_even_when_idle() -> None:
    handler = GateHandler()
    service = make_service(handler, cost=FixedCost(11.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        await started(service, handler)
        with pytest.raises(TooLarge, match="more than the 10s timeout"):
            await service.answer(SHORT, service.clock.now())
        await service.close()

    run(main())
    assert handler.calls == [] and service.admission.refused_too_large == 1


def test_admission_control_can_be_switched_off() -> None:
    handler = GateHandler()
    service = make_service(
        handler, cost=FixedCost(11.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10", SAGEBOX_ADMISSION_CONTROL="0"
    )

    async def main() -> None:
        await started(service, handler)
        assert await service.answer(SHORT, service.clock.now())
        await service.close()

    run(main())
    assert len(handler.calls) == 1


def _abandon_mid_batch(
    leave: Callable[[InferenceService, ManualClock, asyncio.Task[Any]], None],
) -> tuple[InferenceService, int]:
    """A two-window request: its first window runs (gate closed), its caller leaves, the gate opens. Returns the
    service and how many model calls the request made."""
    handler = GateHandler()
    clock = ManualClock()
    service = make_service(handler, clock=clock, SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> int:
        await started(service, handler)
        handler.open.clear()
        task = asyncio.create_task(service.answer(LONG, clock.now()))
        await wait_for(handler.entered)  # window 1 is in the model, window 2 waits on the inference thread
        leave(service, clock, task)
        with pytest.raises((DeadlineExceeded, asyncio.CancelledError)):
            await task
        handler.open.set()
        # A later request runs only after the abandoned batch is over: its answer orders the check below.
        await service.answer(SHORT, clock.now())
        calls = len(handler.calls) - 1
        await service.close()
        return calls

    return service, run(main())


def test_a_request_past_its_deadline_costs_no_further_model_calls() -> None:
    service, calls = _abandon_mid_batch(lambda service, clock, task: clock.advance(10.0))
    assert calls == 1
    stats = service.stats()["admission"]
    assert stats["timed_out"] == 1 and stats["dropped_features"] == 1
    assert service.admission.backlog_s == 0.0


def test_a_request_whose_caller_left_costs_no_further_model_calls() -> None:
    def cancel(service: InferenceService, clock: ManualClock, task: asyncio.Task[Any]) -> None:
        task.cancel()  # what the HTTP layer does when the client disconnects

    service, calls = _abandon_mid_batch(cancel)
    assert calls == 1
    stats = service.stats()["admission"]
    assert stats["abandoned"] == 1 and stats["dropped_features"] == 1 and stats["timed_out"] == 0


def test_queued_work_of_a_timed_out_request_leaves_the_queue() -> None:
    handler = GateHandler()
    clock = ManualClock()
    service = make_service(handler, clock=clock, SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        await started(service, handler)
        handler.open.clear()
        first = asyncio.create_task(service.answer(SHORT, clock.now()))
        await wait_for(handler.entered)
        clock.advance(5.0)
        late = asyncio.create_task(service.answer(SHORT, clock.now()))  # deadline 5 s after the first's
        await asyncio.sleep(0)
        assert service.stats()["queued_features"] == 1
        clock.advance(5.0)  # the first request's deadline: it times out; the second still has 5 s
        with pytest.raises(DeadlineExceeded, match="longer than 10s"):
            await first
        clock.advance(5.0)  # and now the second's
        with pytest.raises(DeadlineExceeded):
            await late
        assert service.stats()["queued_features"] == 0
        handler.open.set()
        await service.answer(SHORT, clock.now())
        await service.close()

    run(main())
    assert [len(ids) for ids in handler.calls] == [1, 1]  # the first request's call and the last one's


def test_closing_fails_queued_work_and_refuses_new_work() -> None:
    handler = GateHandler()

    async def main() -> None:
        service = await started(make_service(handler), handler)
        handler.open.clear()
        running = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await wait_for(handler.entered)
        queued = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await asyncio.sleep(0)
        await service.close()  # does not wait for the running call
        with pytest.raises(NotReady, match="shutting down"):
            await queued
        with pytest.raises(NotReady, match="shutting down"):
            await service.answer(SHORT, service.clock.now())
        handler.open.set()
        running.cancel()

    run(main())


def test_the_backlog_shrinks_as_each_model_call_returns() -> None:
    handler = GateHandler()
    service = make_service(handler, cost=FixedCost(1.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        await started(service, handler)
        handler.permits = threading.Semaphore(0)
        task = asyncio.create_task(service.answer(LONG, service.clock.now()))  # two windows, one call each
        await wait_for(handler.entered)
        assert service.admission.backlog_s == 2.0
        handler.entered.clear()
        handler.permits.release()  # the first call returns, the second starts
        await wait_for(handler.entered)
        assert service.admission.backlog_s == 1.0
        handler.permits.release()
        await task
        assert service.admission.backlog_s == 0.0
        await service.close()

    run(main())


def test_far_over_capacity_a_request_is_refused_before_it_is_tokenized(monkeypatch: pytest.MonkeyPatch) -> None:
    handler = GateHandler()
    service = make_service(handler, cost=FixedCost(3.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        await started(service, handler)
        assert service._predictor is not None
        processor = service._predictor.task.processor  # type: ignore[attr-defined]
        featurized: list[str] = []
        real = processor.featurize

        def counting(question: str, context: str) -> list[Feature]:
            featurized.append(context)
            return real(question, context)

        monkeypatch.setattr(processor, "featurize", counting)
        handler.open.clear()
        first = asyncio.create_task(service.answer(SHORT, service.clock.now()))  # 3 s, and 3 s per request learnt
        await wait_for(handler.entered)
        second = asyncio.create_task(service.answer(SHORT, service.clock.now()))
        await asyncio.sleep(0)
        assert len(featurized) == 2 and service.admission.backlog_s == 6.0
        with pytest.raises(Overloaded, match="at capacity"):
            await service.answer(SHORT, service.clock.now())
        assert len(featurized) == 2  # refused on its length alone
        assert service.admission.refused_before_tokenizing == 1
        handler.open.set()
        await asyncio.gather(first, second)
        await service.close()

    run(main())
