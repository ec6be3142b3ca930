"""In-process inference: verify and load a model directory, then answer its task's inputs (no HTTP).

The HTTP server and offline evaluation both run through this, so they cannot disagree.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from container.cpu_kind import Decision, detect
from container.env import DEFAULT_MAX_BATCH_TOKENS
from container.handlers import (
    Handler,
    HandlerError,
    RuntimeOptions,
    close_handler,
    handler_for,
    serve_handler_as,
    warm_up_buckets,
)
from container.manifest import Manifest, load_verified, unlisted_files
from container.tasks import ModelFeature, Task, WindowOutputs, task_for

log = logging.getLogger("sagebox.predictor")

# Told of every model call: (bucket, batch size, seconds the handler took). Runs on the calling (inference) thread.
CallObserver = Callable[[int, int, float], None]


@dataclass(frozen=True)
class PredictorOptions:
    threads: int = 1
    spin_wait: bool = True
    flush_denormals: bool = True
    doc_stride: int = 128
    max_answer_tokens: int = 30
    max_batch_size: int = 8
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    # Which build of a model with several to load (container/cpu_kind.py): "auto" or a runtime name; the CPU kind
    # the choice is made for (None: this machine's, or SAGEBOX_CPU_KIND's).
    runtime_pin: str = "auto"
    cpu_kind: str | None = None
    static_shapes_mb: int | None = None
    background_compile: bool = False

    @property
    def runtime(self) -> RuntimeOptions:
        """What the handler gets: how it may use the CPUs."""
        return RuntimeOptions(
            self.threads, self.spin_wait, self.flush_denormals, self.static_shapes_mb, self.background_compile
        )


@dataclass(frozen=True)
class LoadTimes:
    """Where a load's seconds went: the manifest and every file's sha256, the runtime's import and session, the
    task's tokenizer, and the warm-up calls (on `warmed` buckets)."""

    verify_s: float
    runtime_s: float
    task_s: float
    warm_up_s: float
    warmed: tuple[int, ...]

    def describe(self) -> str:
        return (
            f"verify {self.verify_s:.3f}s, runtime and session {self.runtime_s:.3f}s, tokenizer {self.task_s:.3f}s, "
            f"warm-up {self.warm_up_s:.3f}s on buckets {list(self.warmed)}"
        )


class Predictor:
    def __init__(
        self,
        manifest: Manifest,
        handler: Handler,
        task: Task,
        max_batch_size: int,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        on_call: CallObserver | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.manifest = manifest
        self.handler = handler
        self.task = task
        self.max_batch_size = max_batch_size
        self.max_batch_tokens = max_batch_tokens
        self._calls: Counter[tuple[int, int]] = Counter()  # (bucket, batch size) -> model calls
        self._on_call = on_call
        self._timer = timer
        self.load_times: LoadTimes | None = None  # set by load()
        # Which build load() chose, for which CPU kind, and why.
        self.decision = Decision(manifest.runtime, manifest.model_file, "other", "loaded directly")

    @classmethod
    def load(
        cls, model_dir: Path, options: PredictorOptions | None = None, on_call: CallObserver | None = None
    ) -> Predictor:
        """Verify every file against the manifest, load the runtime's handler, and warm it up (`warm_up`; `on_call`
        hears of every model call, warm-up included). `load_times` says where the seconds went."""
        options = options or PredictorOptions()
        started = time.perf_counter()
        verified_manifest = load_verified(model_dir)
        extra = unlisted_files(model_dir, verified_manifest)
        if extra:
            log.warning("ignoring %d file(s) the manifest does not list: %s", len(extra), ", ".join(extra[:5]))
        try:
            kind = options.cpu_kind or detect(os.environ)
            manifest, decision = verified_manifest.for_cpu(kind, options.runtime_pin)
        except ValueError as exc:
            raise HandlerError(str(exc)) from None
        if verified_manifest.alternatives:
            log.info("loading %s", decision.describe())
        verified = time.perf_counter()
        handler = handler_for(manifest.runtime)
        handler.load(model_dir, manifest, options.runtime)
        loaded = time.perf_counter()
        task = task_for(manifest, model_dir, doc_stride=options.doc_stride, max_answer_tokens=options.max_answer_tokens)
        predictor = cls(manifest, handler, task, options.max_batch_size, options.max_batch_tokens, on_call)
        predictor.decision = decision
        tokenized = time.perf_counter()
        warmed = predictor.warm_up()
        predictor.load_times = LoadTimes(
            verified - started, loaded - verified, tokenized - loaded, time.perf_counter() - tokenized, tuple(warmed)
        )
        return predictor

    def warm_up(self) -> list[int]:
        """One inference on each bucket the handler's warm-up plan names (every bucket, unless its runtime needs
        fewer: container/handlers/base.py's WarmUpPlan), in order; raises HandlerError unless every output has the
        right shape and is finite. Returns the buckets it ran."""
        buckets = warm_up_buckets(self.handler, self.task.buckets)
        for bucket in buckets:
            self.run([self.task.filler_feature(bucket)])
        return buckets

    def batch_limit(self, bucket: int) -> int:
        """Most features of `bucket` tokens one model call takes: max_batch_size, fewer for long windows."""
        return max(1, min(self.max_batch_size, self.max_batch_tokens // bucket))

    def run(self, features: Sequence[ModelFeature]) -> list[WindowOutputs]:
        """The model's outputs per feature; features are grouped by bucket so no input is padded past its bucket."""
        results = self.run_wanted(features)
        complete = [r for r in results if r is not None]
        assert len(complete) == len(features)  # nothing declines without `wanted`
        return complete

    def run_wanted(
        self,
        features: Sequence[ModelFeature],
        wanted: Callable[[int], bool] | None = None,
        done: Callable[[list[int]], None] | None = None,
    ) -> list[WindowOutputs | None]:
        """Outputs per feature: same-bucket features share model calls of at most `batch_limit(bucket)` features.

        Right before a call, `wanted(i)` is asked about each feature that would go into it: one it declines (its
        caller is gone) never reaches the model and gets None, and the call takes the next feature instead. So a
        batch whose callers leave mid-way stops costing model time. `done(indices)` hears of each call's features
        once the call returned.
        """
        results: list[WindowOutputs | None] = [None] * len(features)
        by_bucket: dict[int, deque[int]] = defaultdict(deque)
        for index, feature in enumerate(features):
            by_bucket[feature.bucket].append(index)
        for bucket, waiting in by_bucket.items():
            limit = self.batch_limit(bucket)
            while waiting:
                chunk: list[int] = []
                while waiting and len(chunk) < limit:
                    index = waiting.popleft()
                    if wanted is None or wanted(index):
                        chunk.append(index)
                if not chunk:
                    break
                outputs = self.predict_batch([features[i] for i in chunk])
                for row, i in enumerate(chunk):
                    results[i] = tuple(output[row] for output in outputs)
                if done is not None:
                    done(chunk)
        return results

    def predict_batch(self, features: Sequence[ModelFeature]) -> tuple[np.ndarray, ...]:
        """One handler call on same-bucket features; checks what the handler returns against the task."""
        inputs = {
            "input_ids": np.stack([f.input_ids for f in features]),
            "attention_mask": np.stack([f.attention_mask for f in features]),
            "token_type_ids": np.stack([f.token_type_ids for f in features]),
        }
        started = self._timer()
        outputs = tuple(self.handler.predict(inputs))
        elapsed = self._timer() - started
        bucket = features[0].bucket
        self._calls[(bucket, len(features))] += 1
        if self._on_call is not None:
            self._on_call(bucket, len(features), elapsed)
        batch, seq = inputs["input_ids"].shape
        try:
            self.task.check_outputs(outputs, batch, seq)
        except ValueError as exc:
            raise HandlerError(str(exc)) from None
        return outputs

    def calls_by_bucket(self) -> dict[str, dict[str, int]]:
        """Model calls so far (warm-up included) as {bucket: {batch size: count}}."""
        table: dict[str, dict[str, int]] = {}
        for (bucket, size), count in sorted(self._calls.items()):
            table.setdefault(str(bucket), {})[str(size)] = count
        return table

    def serve_as(self, uid: int, gid: int) -> None:
        """Processes the handler runs model code in (tensor-parallel workers) take uid/gid, as the server did."""
        serve_handler_as(self.handler, uid, gid)

    def close(self) -> None:
        """Release what the handler holds beyond memory (worker processes of a tensor-parallel model)."""
        close_handler(self.handler)

    def infer(self, items: Iterable[Any], params: Any = None) -> list[Any]:
        """Answers for parsed inputs of the task (the service's sequence, minus admission and micro-batching)."""
        items = list(items)
        if params is None:
            params = self.task.parse_parameters({})
        groups = [self.task.featurize(item, params) for item in items]
        outputs = self.run([f for group in groups for f in group])
        answers, cursor = [], 0
        for item, group in zip(items, groups, strict=True):
            answers.append(self.task.decode(item, group, outputs[cursor : cursor + len(group)], params))
            cursor += len(group)
        return answers

    def answer(self, question: str, context: str) -> Any:
        """A question-answering model's answer (a container.qa.Answer)."""
        return self.answer_many([(question, context)])[0]

    def answer_many(self, pairs: Iterable[tuple[str, str]]) -> list[Any]:
        """A question-answering model's answers to (question, context) pairs."""
        from container.tasks.question_answering import Question

        if self.manifest.task != "question-answering":
            raise HandlerError(f"this is a {self.manifest.task} model, not a question-answering one")
        return self.infer(Question(q, c) for q, c in pairs)
