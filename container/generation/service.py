"""The text-generation service under the HTTP layer: the model's lifecycle, the engine's thread, and each request's
stream of tokens from that thread to the event loop.

It has the lifecycle of the encoders' InferenceService (container/service.py), so the app, /ping, the drain on
SIGTERM and the refusals before reading treat both alike: load on the inference thread, drop root, READY or FAILED.
A setting that contradicts the model (container/generation/limits.py) refuses it at start, in one line. A request is
tokenized (a chat through the model's template), checked against MAX_TOTAL_TOKENS and, for a decoder compiled for
NeuronCores, its largest sequence bucket (400 when its prompt cannot fit), refused with 503 and Retry-After when
MAX_CONCURRENT_REQUESTS generations already run or wait, and otherwise handed to the engine, which calls back on its
thread; the callbacks post to the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from container.admission import Overloaded
from container.clock import Clock, MonotonicClock
from container.env import EnvError, ServerSettings, memory_bytes
from container.generation.decoder import KVCache
from container.generation.engine import Engine, Job, new_job
from container.generation.events import Outcome, Token
from container.generation.limits import EngineLimits, engine_limits, neuron_limits
from container.generation.model import GenerationModel, load_generation_model
from container.generation.neuron import NeuronSteps
from container.generation.request import CHAT, TGI, GenerationRequest, Limits
from container.generation.sampling import Sampler
from container.manifest import ManifestError, load_verified
from container.privileges import Identity, drop_privileges
from container.service import FAILED_REASON, REFUSED_REASON, ModelStatus, NotReady
from container.tasks.base import BadInput, InputTooLong
from neuron_emu.errors import NeuronEmuError

log = logging.getLogger("sagebox.server")
ENGINE_THREAD = "sagebox-generation"
SETTINGS_REASON = "model refused: the environment's settings contradict the model; see the server log"


class Failed(Exception):
    """The model failed while generating this request's tokens."""


@dataclass
class GenerationStream:
    """One request's tokens as they come, then its Outcome (or Failed). `cancel` when the client goes."""

    job: Job
    queue: asyncio.Queue[Token | Outcome | Failed]
    cancel: Callable[[], None]
    prompt: str

    async def events(self) -> AsyncIterator[Token | Outcome]:
        while True:
            item = await self.queue.get()
            if isinstance(item, Failed):
                raise item
            yield item
            if isinstance(item, Outcome):
                return

    async def outcome(self) -> Outcome:
        async for item in self.events():
            if isinstance(item, Outcome):
                return item
        raise Failed("the generation ended without an answer")


class GenerationService:
    def __init__(
        self,
        settings: ServerSettings,
        *,
        clock: Clock | None = None,
        drop_privileges: Callable[[str], object] = drop_privileges,
        on_inference_thread: Callable[[], None] | None = None,
        memory: Callable[[], int] = memory_bytes,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or MonotonicClock()
        self.status = ModelStatus.LOADING
        self.reason = ""
        self.load_seconds = 0.0
        self._drop_privileges = drop_privileges
        self._on_inference_thread = on_inference_thread
        self._memory = memory
        self._started = False
        self.model: GenerationModel | None = None
        self.limits: EngineLimits | None = None
        self.engine: Engine | None = None
        self._thread: threading.Thread | None = None
        self.refused = 0
        self.abandoned = 0
        self.failed = 0

    # --- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        started = time.perf_counter()
        try:
            engine = await asyncio.to_thread(self._load)
        except EnvError as exc:  # a setting contradicts the model (its compiled shapes, its context)
            self._fail("model refused", exc, SETTINGS_REASON)
            self._drop_privileges(self.settings.service_user)
            return
        except ManifestError as exc:
            self._fail("model refused", exc)
            self._drop_privileges(self.settings.service_user)
            return
        except Exception as exc:
            log.error("loading the model from %s raised:", self.settings.model_dir, exc_info=exc)
            self._fail("model failed to load", exc)
            self._drop_privileges(self.settings.service_user)
            return
        identity = self._drop_privileges(self.settings.service_user)
        model = self.model
        if isinstance(identity, Identity) and model is not None and isinstance(model.decoder, NeuronSteps):
            # A compiled decoder's tensor-parallel worker processes follow the server, as the encoders' do.
            try:
                await asyncio.to_thread(model.decoder.serve_as, identity.uid, identity.gid)
            except NeuronEmuError as exc:
                self._fail("model failed to load", exc)
                model.decoder.close()
                return
        self.engine = engine
        self._thread = threading.Thread(target=self._run_engine, name=ENGINE_THREAD, daemon=True)
        self._thread.start()
        if self._on_inference_thread is not None:
            self._on_inference_thread()
        self.load_seconds = time.perf_counter() - started
        self.status = ModelStatus.READY
        assert self.model is not None and self.limits is not None
        limits, config = self.limits, self.model.config
        compiled = self.model.compiled
        if compiled is not None:
            log.info(
                "compiled for NeuronCores (%s): tensor parallel %d, batch %d, max length %d, buckets %s, %s",
                self.model.manifest.compile.backend if self.model.manifest.compile else "?",
                compiled.tensor_parallel,
                compiled.batch_size,
                compiled.max_length,
                list(compiled.buckets),
                compiled.auto_cast_type,
            )
        log.info(
            "model ready in %.2fs: task=text-generation architecture=%s layers=%d context=%d max_total_tokens=%d "
            "slots=%d kv_cache=%.0f MiB prefill_chunk=%d threads=%d",
            self.load_seconds,
            config.model_type,
            config.layers,
            config.max_positions,
            limits.max_total_tokens,
            limits.slots,
            limits.cache_tokens * config.kv_bytes_per_token / 2**20,
            limits.prefill_chunk,
            self.settings.engine_threads,
        )

    def _fail(self, what: str, exc: BaseException, reason: str | None = None) -> None:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        log.error("%s: %s", what, detail)
        self.status = ModelStatus.FAILED
        self.reason = reason or (REFUSED_REASON if what == "model refused" else FAILED_REASON)

    def _load(self) -> Engine:
        import torch

        torch.set_num_threads(self.settings.engine_threads)
        manifest = load_verified(self.settings.model_dir)
        model = load_generation_model(self.settings.model_dir, manifest)
        try:
            if isinstance(model.decoder, NeuronSteps):
                assert model.compiled is not None
                limits = neuron_limits(self.settings, model.compiled)
                engine = Engine(
                    model.decoder, model.decoder, self.clock.now, model.special_ids, limits.prefill_chunk, True
                )
            else:
                limits = engine_limits(self.settings, model.config, self._memory())
                cache = KVCache(model.config, limits.slots, limits.max_total_tokens)
                engine = Engine(model.decoder, cache, self.clock.now, model.special_ids, limits.prefill_chunk)
        except BaseException:
            model.close()
            raise
        self.model, self.limits = model, limits
        return engine

    def _run_engine(self) -> None:
        import torch

        torch.set_num_threads(self.settings.engine_threads)  # intra-op threads are per calling thread's pool
        assert self.engine is not None
        self.engine.run()

    async def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        thread = self._thread
        if thread is not None:
            await asyncio.to_thread(thread.join, 5.0)
        if self.model is not None:
            await asyncio.to_thread(self.model.close)

    # --- requests ------------------------------------------------------------------------------------------------

    def check_ready(self) -> None:
        if self.status is ModelStatus.LOADING:
            raise NotReady("model is loading")
        if self.status is ModelStatus.FAILED:
            raise NotReady(f"model is not available: {self.reason}", retry_after_s=None)

    def refuse_unread(self, body_bytes: int) -> Overloaded | None:
        """Before a body is read: refused when the engine already holds all the generations it takes."""
        if self.status is not ModelStatus.READY or self.engine is None or self.limits is None:
            return None
        if self.engine.load >= self.limits.max_concurrent:
            self.refused += 1
            return Overloaded(self._busy_message(), retry_after_s=1)
        return None

    def _busy_message(self) -> str:
        assert self.limits is not None
        return f"the endpoint is generating for {self.limits.max_concurrent} requests already; retry later"

    def request_limits(self) -> Limits:
        """What one request may ask for (the parser's bounds)."""
        self.check_ready()
        assert self.limits is not None
        return Limits(self.limits.max_total_tokens - 1, self.limits.default_new_tokens)

    def prompt_of(self, request: GenerationRequest) -> tuple[str, list[int]]:
        """The prompt's text and token ids: a chat through the model's template, a text as given."""
        model = self.model
        assert model is not None and model.manifest.generation is not None
        if request.api == CHAT:
            if model.chat is None:
                raise BadInput('this model has no chat template: send {"inputs": "..."} instead of messages')
            text = model.chat.render(request.messages)
            ids = model.encode(text, add_special_tokens=False)  # the template writes the special tokens itself
        else:
            text = request.prompt
            ids = model.encode(text, add_special_tokens=model.manifest.generation.add_special_tokens)
        if request.truncate is not None:
            ids = ids[-request.truncate :]
        if not ids:
            raise BadInput("the prompt holds no tokens")
        return text, ids

    def generate(self, request: GenerationRequest, arrived: float) -> GenerationStream:
        """Start a generation on the engine; its events arrive on the calling event loop."""
        self.check_ready()
        engine, limits, model = self.engine, self.limits, self.model
        assert engine is not None and limits is not None and model is not None
        text, ids = self.prompt_of(request)
        total = f"{limits.total_tokens_variable} {limits.max_total_tokens}"
        room = limits.max_total_tokens - len(ids)
        if room < 1:
            raise InputTooLong(
                f"the prompt is {len(ids)} tokens; this endpoint takes at most {limits.max_total_tokens - 1} "
                f"({total} counts prompt and generated tokens)"
            )
        longest = limits.max_prompt_tokens
        if longest is not None and len(ids) > longest:
            raise InputTooLong(
                f"the prompt is {len(ids)} tokens; this endpoint's model was compiled for prompts of at most {longest} "
                "tokens (its largest sequence bucket)"
            )
        max_new = request.max_new_tokens
        if max_new > room:
            if request.explicit_max_new:
                raise InputTooLong(f"the prompt's {len(ids)} tokens plus max_new_tokens {max_new} exceed {total}")
            max_new = room
        if engine.load >= limits.max_concurrent:
            self.refused += 1
            raise Overloaded(self._busy_message(), retry_after_s=1)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Token | Outcome | Failed] = asyncio.Queue()

        def post(item: Token | Outcome | Failed) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        def failed(reason: str) -> None:
            self.failed += 1
            post(Failed(reason))

        job = new_job(
            ids,
            Sampler(request.sampling),
            max_new,
            request.stop,
            request.api == TGI,  # TGI keeps a stop sequence in the text, OpenAI leaves it out
            model.decode,
            post,
            post,
            model.eos_ids,
            deadline=arrived + self.settings.timeout_s,
            on_failed=failed,
        )
        engine.submit(job)

        def cancel() -> None:
            if not job.finished:
                self.abandoned += 1
                engine.cancel(job)

        return GenerationStream(job, queue, cancel, text)

    # --- reporting -----------------------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status.value, "load_seconds": round(self.load_seconds, 3)}
        engine, limits, model = self.engine, self.limits, self.model
        if engine is not None and limits is not None and model is not None:
            body["manifest"] = {
                "task": "text-generation",
                "architecture": model.config.model_type,
                "variant": model.manifest.variant,
            }
            body["generation"] = {
                "running": len(engine.running),
                "waiting": len(engine.waiting),
                "steps": engine.steps,
                "tokens_out": engine.tokens_out,
                "slots": limits.slots,
                "max_total_tokens": limits.max_total_tokens,
                "kv_cache_bytes": limits.cache_tokens * model.config.kv_bytes_per_token,
                "refused": self.refused,
                "abandoned": self.abandoned,
                "failed": self.failed,
            }
            if model.compiled is not None:
                body["generation"]["compiled"] = {
                    "tensor_parallel": model.compiled.tensor_parallel,
                    "batch_size": model.compiled.batch_size,
                    "max_length": model.compiled.max_length,
                    "buckets": list(model.compiled.buckets),
                    "auto_cast_type": model.compiled.auto_cast_type,
                }
        return body
