"""The serving service: model lifecycle and the inference sequence, with no HTTP in sight.

`InferenceService.start()` verifies and loads the model on the inference thread (runtimes set per-thread state such
as flush-to-zero at load), then drops root; `answer()` runs featurize -> window limit -> admission -> micro-batched
model calls -> decode for one parsed request, each step the model's task's (container/tasks). The HTTP layer
(container/app.py) maps the errors below to statuses.

Work whose caller is gone never reaches the model: a request that times out or whose client disconnects is
cancelled, its queued windows leave the batcher's queue at once, and the inference thread skips the windows of
such requests before each model call (the deadline is checked there too, on the same clock).
"""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from container import payload
from container.admission import Admission, Charge, CostEstimate, EwmaCost, Overloaded
from container.batching import BatcherClosed, MicroBatcher
from container.clock import Clock, MonotonicClock
from container.env import ServerSettings
from container.errors import ContainerError
from container.handlers import HandlerError
from container.manifest import ManifestError
from container.predictor import CallObserver, Predictor, PredictorOptions
from container.privileges import Identity, drop_privileges
from container.tasks import ModelFeature, Task, WindowOutputs
from container.uptime import process_age_s

log = logging.getLogger("sagebox.server")

# Tokenize in a worker thread above this many characters, so a huge context cannot stall /ping.
INLINE_TOKENIZE_CHARS = 64 * 1024
# Queued model work may fill this share of a request's timeout. Measured with the INT8 demo model on one CPU under
# a retry storm of 48 clients (timeout 2 s, HTTP thread niced): filling the whole timeout, 20 of ~165 admitted
# requests ended 504 and 26 answers reached their clients after 2 s (the busy event loop reads and answers each
# request up to a loop cycle late, and the model's times have a tail); the queue still keeps the model busy when
# it holds less.
ADMIT_SHARE = 0.75
# What a client is told about a model that did not load; the details (paths, library messages) stay in the log.
REFUSED_REASON = "model refused: the model directory failed verification"
FAILED_REASON = "model failed to load; see the server log"
# The log line carrying the detail is at most this long (a TorchScript error carries its whole script traceback).
MAX_DETAIL_CHARS = 2000

Loader = Callable[[CallObserver], Predictor]


class ModelStatus(enum.Enum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class ServiceError(ContainerError):
    """A request the service cannot answer; the message is safe to show the client."""


class NotReady(ServiceError):
    """The model is loading, failed to load, or the server is shutting down. `retry_after_s`: when a retry can
    succeed (loading: soon; shutting down: another instance takes it), None when it cannot (the model failed)."""

    def __init__(self, message: str, retry_after_s: int | None = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TooManyWindows(ServiceError):
    """The request needs more model windows than SAGEBOX_MAX_FEATURES_PER_REQUEST."""


class DeadlineExceeded(ServiceError):
    """The answer was not ready within SAGEMAKER_MODEL_SERVER_TIMEOUT of the request's arrival."""


@dataclass(eq=False)
class _Job:
    """One request's state, read by the inference thread before each model call."""

    deadline: float
    abandoned: bool = False


@dataclass(eq=False, slots=True)
class _Work:
    """One window of one request, as the batcher carries it."""

    feature: ModelFeature
    job: _Job
    charge: Charge


@dataclass(frozen=True)
class _LoadFailure:
    reason: str  # for clients
    detail: str  # for the log


class InferenceService:
    def __init__(
        self,
        settings: ServerSettings,
        *,
        loader: Loader | None = None,
        clock: Clock | None = None,
        cost: CostEstimate | None = None,
        drop_privileges: Callable[[str], object] = drop_privileges,
        on_inference_thread: Callable[[], None] | None = None,
    ) -> None:
        """`on_inference_thread`: called on the caller's thread once the inference thread runs (a real server's
        HTTP thread yields the CPU to the model there: container/priorities.py)."""
        self.settings = settings
        self.clock: Clock = clock or MonotonicClock()
        self.cost: CostEstimate = cost or EwmaCost()
        self.admission = Admission(settings.timeout_s, settings.admission_control, share=ADMIT_SHARE)
        self.status = ModelStatus.LOADING
        self.reason = ""  # why the model is not available, as clients see it
        self.load_seconds = 0.0
        # /ping's body once READY: which build serves, on which CPU kind (encoded once: /ping is polled).
        self.ready_body = b'{"status": "ready"}'
        self._loader = loader or self._load_from_settings
        self._drop_privileges = drop_privileges
        self._on_inference_thread = on_inference_thread
        self._started = False
        self._predictor: Predictor | None = None
        self._batcher: MicroBatcher[_Work, WindowOutputs | None] | None = None
        self.timed_out = 0
        self.abandoned = 0
        self.dropped_features = 0  # windows the inference thread skipped: their caller was gone

    # --- lifecycle ------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the model on the inference thread, drop root, and become READY (or FAILED). Runs once."""
        if self._started:
            return
        self._started = True
        batcher: MicroBatcher[_Work, WindowOutputs | None] = MicroBatcher(
            self._run, self.settings.max_batch_size, self.settings.max_batch_wait_ms / 1000.0
        )
        batcher.start()
        if self._on_inference_thread is not None:
            self._on_inference_thread()
        try:
            outcome = await batcher.call(self._load)
        except asyncio.CancelledError:
            await batcher.close(wait=False)
            raise
        if isinstance(outcome, _LoadFailure):
            self.status, self.reason = ModelStatus.FAILED, outcome.reason
        # The model is read (or refused) as whoever started the server; requests are served as the service user.
        identity = self._drop_privileges(self.settings.service_user)
        if isinstance(outcome, _LoadFailure):
            await batcher.close()
            return
        if isinstance(identity, Identity):
            # Model code running in processes of the handler's own (tensor-parallel workers) follows the server.
            try:
                await batcher.call(lambda: outcome.serve_as(identity.uid, identity.gid))
            except HandlerError as exc:
                log.error("model failed to load: %s", _one_line(exc))
                self.status, self.reason = ModelStatus.FAILED, FAILED_REASON
                await batcher.close()
                outcome.close()
                return
        self._predictor, self._batcher = outcome, batcher
        decision = outcome.decision
        self.ready_body = json.dumps(
            {"status": "ready", "runtime": decision.runtime, "cpu_kind": decision.cpu_kind, "reason": decision.reason}
        ).encode()
        self.status = ModelStatus.READY
        m = outcome.manifest
        age = process_age_s()
        times = outcome.load_times
        log.info(
            "model ready in %.2fs%s%s: task=%s variant=%s runtime=%s cpu_kind=%s (%s) buckets=%s threads=%d "
            "max_batch=%d max_batch_tokens=%d",
            self.load_seconds,
            "" if age is None else f", {age:.2f}s after the process started",
            "" if times is None else f" ({times.describe()})",
            m.task,
            m.variant,
            m.runtime,
            outcome.decision.cpu_kind,
            outcome.decision.reason,
            m.sequence_buckets,
            self.settings.intra_op_threads,
            self.settings.max_batch_size,
            self.settings.max_batch_tokens,
        )

    async def close(self) -> None:
        """Fail queued work and stop the inference thread (without waiting for a model call still running: after
        a drain deadline cut requests off, their last call must not hold up the exit)."""
        batcher = self._batcher
        if batcher is not None:
            await batcher.close(wait=not batcher.busy)
        if self._predictor is not None:
            self._predictor.close()  # e.g. a tensor-parallel model's worker processes

    def _load_from_settings(self, on_call: CallObserver) -> Predictor:
        s = self.settings
        options = PredictorOptions(
            threads=s.intra_op_threads,
            spin_wait=s.spin_wait,
            flush_denormals=s.flush_denormals,
            doc_stride=s.doc_stride,
            max_answer_tokens=s.max_answer_tokens,
            max_batch_size=s.max_batch_size,
            max_batch_tokens=s.max_batch_tokens,
            runtime_pin=s.runtime_pin,
            cpu_kind=s.cpu_kind,
            static_shapes_mb=s.static_shapes_mb,
            background_compile=True,  # ready sooner: runtimes' per-shape graphs follow while it serves
        )
        return Predictor.load(s.model_dir, options, on_call=on_call)

    def _load(self) -> Predictor | _LoadFailure:
        """Verify and load the model (blocking, on the inference thread); why not, when it cannot."""
        started = time.perf_counter()
        try:
            predictor = self._loader(self.cost.observe)
        except ManifestError as exc:
            failure = _LoadFailure(REFUSED_REASON, f"model refused: {_one_line(exc)}")
        except Exception as exc:
            if not isinstance(exc, HandlerError):  # unexpected: whoever debugs it needs the traceback
                log.error("loading the model from %s raised:", self.settings.model_dir, exc_info=exc)
            failure = _LoadFailure(FAILED_REASON, f"model failed to load: {type(exc).__name__}: {_one_line(exc)}")
        else:
            self.load_seconds = time.perf_counter() - started
            return predictor
        # One line the control plane reads back from the container's log: "model refused: ..." or "model failed
        # to load: ...", followed by the detail. Clients only get the short reason.
        log.error("%s", failure.detail)
        return failure

    # --- answering ------------------------------------------------------------------------------------------------

    def refuse_unread(self, body_bytes: int) -> Overloaded | None:
        """The at-capacity refusal for a request of `body_bytes` arriving now, before it is read; None: read it."""
        if self.status is not ModelStatus.READY:
            return None
        return self.admission.refuse_unread(body_bytes, self.clock.now())

    def check_ready(self) -> None:
        if self.status is ModelStatus.LOADING:
            raise NotReady("model is loading")
        if self.status is ModelStatus.FAILED:
            raise NotReady(f"model is not available: {self.reason}", retry_after_s=None)

    @property
    def task(self) -> Task:
        """The loaded model's task (parses requests and shapes answers); only once the model is READY."""
        self.check_ready()
        assert self._predictor is not None
        return self._predictor.task

    async def answer(self, request: payload.Request, arrived: float, body_bytes: int = 0) -> list[Any]:
        """Answers for `request`'s inputs, in order, or a ServiceError / Refused / InputTooLong saying why not.

        `arrived` (on `self.clock`) starts the SAGEMAKER_MODEL_SERVER_TIMEOUT budget; `body_bytes`, the request's
        size on the wire, teaches admission the price per byte that refuses requests before they are read.
        """
        self.check_ready()
        predictor, batcher = self._predictor, self._batcher
        assert predictor is not None and batcher is not None
        task, params = predictor.task, request.parameters
        deadline = arrived + self.settings.timeout_s
        chars = sum(task.item_chars(item) for item in request.items)
        self.admission.precheck(chars, self.clock.now(), deadline)
        groups = await self._featurize(task, request, chars)
        flat = [f for group in groups for f in group]
        if len(flat) > self.settings.max_features_per_request:
            raise TooManyWindows(
                f"request needs {len(flat)} model windows; the limit is {self.settings.max_features_per_request} "
                "(shorten the text or split the request)"
            )
        costs = [self.cost.seconds(f.bucket) for f in flat]
        expected = sum(self.cost.expected(f.bucket) for f in flat)
        ahead = self.admission.backlog_s
        charges = self.admission.admit(costs, self.clock.now(), deadline, expected)
        admitted_at = self.clock.now()
        self.admission.learn(chars, sum(costs), body_bytes)
        job = _Job(deadline)
        finished = False
        try:
            async with self.clock.timeout_at(deadline):  # the deadline cancels the wait, then raises TimeoutError
                try:
                    outputs = await batcher.submit([_Work(f, job, c) for f, c in zip(flat, charges, strict=True)])
                except TimeoutError as exc:  # the model's own, which is a model failure (500), not our deadline
                    raise RuntimeError(f"the model raised TimeoutError: {exc}") from exc
        except TimeoutError:
            self.timed_out += 1
            raise DeadlineExceeded(f"inference took longer than {self.settings.timeout_s}s") from None
        except BatcherClosed:
            raise NotReady("server is shutting down") from None
        except asyncio.CancelledError:
            self.abandoned += 1
            raise
        else:
            finished = True
        finally:
            job.abandoned = True  # whatever of it is still queued is not wanted any more
            self.admission.release(charges)
            if finished or self.clock.now() >= deadline:  # answered, or cut at its deadline (a lower bound)
                self.admission.completed(ahead + sum(costs), self.clock.now() - admitted_at)
        if any(item is None for item in outputs):  # the inference thread saw the deadline pass first
            self.timed_out += 1
            raise DeadlineExceeded(f"inference took longer than {self.settings.timeout_s}s")
        complete = cast(list[WindowOutputs], outputs)
        answers = []
        cursor = 0
        for item, group in zip(request.items, groups, strict=True):
            answers.append(task.decode(item, group, complete[cursor : cursor + len(group)], params))
            cursor += len(group)
        return answers

    async def _featurize(self, task: Task, request: payload.Request, chars: int) -> list[list[ModelFeature]]:
        def featurize() -> list[list[ModelFeature]]:
            return [list(task.featurize(item, request.parameters)) for item in request.items]

        if chars > INLINE_TOKENIZE_CHARS:
            return await asyncio.to_thread(featurize)
        return featurize()

    def _run(self, items: Sequence[_Work]) -> list[WindowOutputs | None]:
        """On the inference thread: model calls for the windows whose callers still wait and are within deadline."""
        predictor = self._predictor
        assert predictor is not None

        def wanted(index: int) -> bool:
            job = items[index].job
            if job.abandoned or self.clock.now() >= job.deadline:
                self.dropped_features += 1
                self.admission.release([items[index].charge])
                return False
            return True

        def done(indices: list[int]) -> None:  # the backlog shrinks call by call, not batch by batch
            self.admission.release(items[i].charge for i in indices)

        try:
            return predictor.run_wanted([item.feature for item in items], wanted, done)
        finally:
            self.admission.release(item.charge for item in items)

    # --- reporting ------------------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status.value, "load_seconds": round(self.load_seconds, 3)}
        batcher, predictor = self._batcher, self._predictor
        if batcher is not None and predictor is not None:
            body["batches"] = batcher.stats.batches
            body["features"] = batcher.stats.items
            body["largest_batch"] = batcher.stats.largest
            body["batch_sizes"] = {str(k): v for k, v in sorted(batcher.stats.sizes.items())}
            body["queued_features"] = batcher.queued
            body["model_busy"] = batcher.busy
            body["model_calls"] = predictor.calls_by_bucket()
            body["manifest"] = {
                "task": predictor.manifest.task,
                "variant": predictor.manifest.variant,
                "runtime": predictor.manifest.runtime,
                "sequence_buckets": predictor.manifest.sequence_buckets,
            }
            body["runtime"] = {
                "name": predictor.decision.runtime,
                "model_file": predictor.decision.model_file,
                "cpu_kind": predictor.decision.cpu_kind,
                "reason": predictor.decision.reason,
            }
        estimate = self.cost.snapshot()
        body["admission"] = {
            "enabled": self.admission.enabled,
            "backlog_s": round(self.admission.backlog_s, 6),
            "slowdown": round(self.admission.slowdown, 3),
            "admitted": self.admission.admitted,
            "refused_busy": self.admission.refused_busy,
            "refused_too_large": self.admission.refused_too_large,
            "refused_before_tokenizing": self.admission.refused_before_tokenizing,
            "refused_before_reading": self.admission.refused_before_reading,
            "timed_out": self.timed_out,
            "abandoned": self.abandoned,
            "dropped_features": self.dropped_features,
            "seconds_per_feature": {str(b): round(s, 6) for b, s in estimate.items()},
        }
        return body


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= MAX_DETAIL_CHARS else text[: MAX_DETAIL_CHARS - 3] + "..."
