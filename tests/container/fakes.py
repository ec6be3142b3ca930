"""Stand-ins for the serving tests: a hand-advanced clock, a fixed cost estimate, and a model handler that blocks
until the test lets it go, so "the model is busy", "the deadline passed" and "the client left" are events a test
orders explicitly instead of wall-clock thresholds or sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import numpy as np

from container.env import ServerSettings
from container.manifest import Manifest, SourceSpec, TokenizerSpec
from container.predictor import CallObserver, Predictor
from container.qa import QAProcessor
from container.service import InferenceService
from container.tasks.question_answering import QuestionAnswering
from tests.conftest import minilm_tokenizer_path

BUCKETS = [64, 128, 256, 384]
# Long enough that no test waits this long: a wait that times out means the event it waited for never came.
EVENT_TIMEOUT_S = 30.0


class ManualClock:
    """Time stands still until `advance()`; deadlines fire when it passes them (call from the event loop)."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timeouts: list[tuple[float, asyncio.Timeout]] = []

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
        loop = asyncio.get_running_loop()
        for deadline, timeout in list(self._timeouts):
            if self._now >= deadline and not timeout.expired():
                timeout.reschedule(loop.time())  # expires at the loop's next turn

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[object]:
        return self._timeout(deadline)

    @contextlib.asynccontextmanager
    async def _timeout(self, deadline: float) -> AsyncIterator[object]:
        async with asyncio.timeout(None) as timeout:
            entry = (deadline, timeout)
            self._timeouts.append(entry)
            if self._now >= deadline:
                timeout.reschedule(asyncio.get_running_loop().time())
            try:
                yield timeout
            finally:
                self._timeouts.remove(entry)


class FixedCost:
    """A cost estimate the test sets: seconds per feature, whatever the bucket; observations are only recorded."""

    def __init__(self, seconds_per_feature: float) -> None:
        self.per_feature = seconds_per_feature
        self.observed: list[tuple[int, int, float]] = []

    def seconds(self, bucket: int) -> float:
        return self.per_feature

    def expected(self, bucket: int) -> float:
        return self.per_feature

    def observe(self, bucket: int, batch: int, seconds: float) -> None:
        self.observed.append((bucket, batch, seconds))

    def snapshot(self) -> dict[int, float]:
        return {}


class GateHandler:
    """A model handler whose calls wait for `open` (set from the start unless `closed=True`). Logits are a fixed
    seeded function of the token ids, so answers are deterministic; every call's input ids are recorded."""

    def __init__(self, closed: bool = False, fail: bool = False) -> None:
        self.open = threading.Event()
        if not closed:
            self.open.set()
        # While set, every call also takes one permit: the test lets calls through one at a time.
        self.permits: threading.Semaphore | None = None
        self.entered = threading.Event()  # set when a call starts; the test clears it to wait for the next one
        self.fail = fail
        self.calls: list[np.ndarray] = []
        self._weights = np.random.default_rng(0).normal(size=(30522, 2)).astype(np.float32)

    def load(self, *args: Any) -> None:
        pass

    def predict(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(inputs["input_ids"].copy())
        self.entered.set()
        if not self.open.wait(EVENT_TIMEOUT_S):
            raise RuntimeError("the test never opened the gate")
        if self.permits is not None and not self.permits.acquire(timeout=EVENT_TIMEOUT_S):
            raise RuntimeError("the test never let this call through")
        if self.fail:
            raise RuntimeError("gate handler asked to fail")
        logits = self._weights[inputs["input_ids"]]
        return np.ascontiguousarray(logits[..., 0]), np.ascontiguousarray(logits[..., 1])


def fake_manifest() -> Manifest:
    digest = "0" * 64
    return Manifest(
        tool_version="test",
        variant="fp32",
        runtime="onnxruntime",
        model_file="model.onnx",
        tokenizer=TokenizerSpec(max_length=BUCKETS[-1]),
        sequence_buckets=BUCKETS,
        source=SourceSpec(name="gate", architecture="GateHandler"),
        files={"model.onnx": digest, "tokenizer.json": digest},
    )


def gate_loader(handler: GateHandler, max_batch_size: int = 8, max_batch_tokens: int = 512) -> Callable[..., Predictor]:
    """A InferenceService loader: a Predictor over `handler` with the real tokenizer, warmed up like a real load."""

    def load(on_call: CallObserver) -> Predictor:
        processor = QAProcessor.from_file(str(minilm_tokenizer_path()), BUCKETS, 128, 30)
        task = QuestionAnswering(processor)
        predictor = Predictor(fake_manifest(), handler, task, max_batch_size, max_batch_tokens, on_call)
        predictor.warm_up()
        return predictor

    return load


def settings(**env: str) -> ServerSettings:
    return ServerSettings.from_env({"SAGEBOX_MODEL_DIR": str(Path("/nonexistent/model")), **env})


def make_service(
    handler: GateHandler,
    clock: ManualClock | None = None,
    cost: FixedCost | None = None,
    drop: Callable[[str], object] = lambda user: None,
    **env: str,
) -> InferenceService:
    config = settings(**env)
    return InferenceService(
        config,
        loader=gate_loader(handler, config.max_batch_size, config.max_batch_tokens),
        clock=clock or ManualClock(),
        cost=cost or FixedCost(0.0),
        drop_privileges=drop,
    )


async def wait_for(event: threading.Event) -> None:
    """Wait (off the event loop) for an event another thread sets."""
    if not await asyncio.to_thread(event.wait, EVENT_TIMEOUT_S):
        raise TimeoutError("the awaited event never happened")
