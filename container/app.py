"""The ASGI app: SageMaker's /ping and /invocations over a Predictor, loaded in the background."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from container import payload
from container.batching import BatcherClosed, MicroBatcher
from container.env import ServerSettings
from container.logs import ensure_logging
from container.manifest import ManifestError
from container.predictor import Logits, Predictor, PredictorOptions
from container.privileges import drop_privileges
from container.qa import Feature, InputTooLong

log = logging.getLogger("sagebox.server")

CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
# Tokenize in a worker thread above this body size, so a huge context cannot stall /ping.
INLINE_TOKENIZE_BYTES = 64 * 1024
MAX_QUESTIONS = 64


@dataclass
class ModelState:
    status: str = "loading"  # loading | ready | failed
    reason: str = ""
    predictor: Predictor | None = None
    batcher: MicroBatcher[Feature, Logits] | None = None
    load_seconds: float = 0.0


def _load(state: ModelState, settings: ServerSettings) -> Predictor | None:
    """Verify and load the model (blocking); records why in `state` when it cannot."""
    started = time.perf_counter()
    options = PredictorOptions(
        threads=settings.intra_op_threads,
        spin_wait=settings.spin_wait,
        flush_denormals=settings.flush_denormals,
        doc_stride=settings.doc_stride,
        max_answer_tokens=settings.max_answer_tokens,
        max_batch_size=settings.max_batch_size,
        max_batch_tokens=settings.max_batch_tokens,
    )
    try:
        predictor = Predictor.load(settings.model_dir, options)
    except ManifestError as exc:
        state.status, state.reason = "failed", f"model refused: {exc}"
        log.error("model refused: %s", exc)
        return None
    except Exception as exc:
        state.status, state.reason = "failed", f"model failed to load: {type(exc).__name__}: {exc}"
        log.exception("model failed to load from %s", settings.model_dir)
        return None
    state.load_seconds = time.perf_counter() - started
    return predictor


async def _load_and_start(state: ModelState, settings: ServerSettings) -> None:
    def run_batch(features: list[Feature]) -> list[Logits]:
        assert state.predictor is not None
        return state.predictor.run(features)

    batcher: MicroBatcher[Feature, Logits] = MicroBatcher(
        run_batch, settings.max_batch_size, settings.max_batch_wait_ms / 1000.0
    )
    batcher.start()
    # Load on the thread that will run inference: runtimes set per-thread state (flush-to-zero) at load.
    predictor = await batcher.call(lambda: _load(state, settings))
    # The model is read (or refused) as whoever started the server; requests are served as the service user.
    drop_privileges(settings.service_user)
    if predictor is None:
        await batcher.close()
        return
    state.predictor, state.batcher = predictor, batcher
    state.status = "ready"
    m = predictor.manifest
    log.info(
        "model ready in %.1fs: variant=%s runtime=%s buckets=%s threads=%d max_batch=%d max_batch_tokens=%d",
        state.load_seconds,
        m.variant,
        m.runtime,
        m.sequence_buckets,
        settings.intra_op_threads,
        settings.max_batch_size,
        settings.max_batch_tokens,
    )


def _json(status: int, body: bytes, request: Request | None = None, media: str = payload.JSON) -> Response:
    headers = {}
    if request is not None and CUSTOM_ATTRIBUTES in request.headers:
        headers[CUSTOM_ATTRIBUTES] = request.headers[CUSTOM_ATTRIBUTES]
    return Response(body, status_code=status, media_type=media, headers=headers)


def _error(status: int, message: str, request: Request | None = None) -> Response:
    return _json(status, payload.error_body(status, message), request)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            declared_size = int(declared)
        except ValueError:
            raise payload.PayloadError(400, "Content-Length is not an integer") from None
        if declared_size > limit:
            raise payload.PayloadError(413, f"body of {declared_size} bytes exceeds the {limit}-byte limit")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise payload.PayloadError(413, f"body exceeds the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def create_app(settings: ServerSettings | None = None) -> Starlette:
    settings = settings or ServerSettings.from_env()
    ensure_logging(settings.log_level)
    state = ModelState()

    async def ping(request: Request) -> Response:
        if state.status == "ready":
            return _json(200, b'{"status": "ready"}')
        body = {"status": state.status, "message": state.reason or "model is loading"}
        return _json(503, json.dumps(body).encode())

    async def invocations(request: Request) -> Response:
        try:
            return await _invoke(request)
        except payload.PayloadError as exc:
            return _error(exc.status, str(exc), request)
        except ClientDisconnect:
            return _error(400, "client disconnected", request)
        except Exception:
            log.exception("unhandled error in /invocations")
            return _error(500, "internal error while answering; see the server log", request)

    async def _invoke(request: Request) -> Response:
        if state.status != "ready" or state.predictor is None or state.batcher is None:
            message = "model is loading" if state.status == "loading" else f"model is not available: {state.reason}"
            return _error(503, message, request)
        fmt_in = payload.request_format(request.headers.get("content-type"))
        fmt_out = payload.response_format(request.headers.get("accept"))
        body = await _read_body(request, settings.max_body_bytes)
        parsed = payload.parse_request(body, fmt_in, MAX_QUESTIONS)
        predictor, batcher = state.predictor, state.batcher
        if len(body) > INLINE_TOKENIZE_BYTES:
            groups = await run_in_threadpool(_featurize_all, predictor, parsed)
        else:
            groups = _featurize_all(predictor, parsed)
        total = sum(len(g) for g in groups)
        if total > settings.max_features_per_request:
            raise payload.PayloadError(
                413,
                f"request needs {total} model windows; the limit is {settings.max_features_per_request} "
                "(shorten the context or split the request)",
            )
        flat = [f for group in groups for f in group]
        try:
            async with asyncio.timeout(settings.timeout_s):
                logits = await batcher.submit(flat)
        except TimeoutError:
            raise payload.PayloadError(504, f"inference took longer than {settings.timeout_s}s") from None
        except BatcherClosed:
            raise payload.PayloadError(503, "server is shutting down") from None
        answers: list[dict[str, Any]] = []
        cursor = 0
        for question, group in zip(parsed.questions, groups, strict=True):
            answer = predictor.processor.decode(question.context, group, logits[cursor : cursor + len(group)])
            answers.append(answer.to_dict())
            cursor += len(group)
        media = payload.JSON_LINES if fmt_out == payload.JSON_LINES else payload.JSON
        return _json(200, payload.render(answers, parsed.batch, fmt_out), request, media)

    async def stats(request: Request) -> Response:
        batcher = state.batcher
        predictor = state.predictor
        body: dict[str, Any] = {"status": state.status, "load_seconds": round(state.load_seconds, 3)}
        if batcher is not None and predictor is not None:
            body["batches"] = batcher.stats.batches
            body["features"] = batcher.stats.items
            body["largest_batch"] = batcher.stats.largest
            body["batch_sizes"] = {str(k): v for k, v in sorted(batcher.stats.sizes.items())}
            body["model_calls"] = predictor.calls_by_bucket()
            body["manifest"] = {
                "variant": predictor.manifest.variant,
                "runtime": predictor.manifest.runtime,
                "sequence_buckets": predictor.manifest.sequence_buckets,
            }
        return _json(200, json.dumps(body).encode())

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error(status, f"{request.method} {request.url.path}: {payload.reason(status).lower()}")

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return _error(500, "internal error; see the server log")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.info("loading model from %s", settings.model_dir)
        loading: asyncio.Task[None] | None = None
        if settings.workers > 1:
            # Workers share one listening socket and only accept once started: loading before that means
            # no worker ever answers /ping or /invocations while its own model is still loading.
            await _load_and_start(state, settings)
        else:
            # One process: answer /ping (503) at once and load in the background.
            loading = asyncio.create_task(_load_and_start(state, settings), name="model-loader")
        yield
        if loading is not None and not loading.done():
            loading.cancel()
        if state.batcher is not None:
            await state.batcher.close()
        log.info("server stopped")

    app = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ],
        exception_handlers={HTTPException: not_found, Exception: server_error},
        lifespan=lifespan,
    )
    app.state.model = state
    return app


def _featurize_all(predictor: Predictor, request: payload.Request) -> list[list[Feature]]:
    try:
        return [predictor.processor.featurize(q.question, q.context) for q in request.questions]
    except InputTooLong as exc:
        raise payload.PayloadError(400, str(exc)) from None
