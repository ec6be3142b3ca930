"""The ASGI app: SageMaker's /ping and /invocations (and /stats) over an InferenceService. HTTP only: reading and
refusing bodies, content negotiation, status codes, client disconnects; the inference sequence lives in
container/service.py and each task's request and answer shapes in container/tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from container import payload
from container.admission import Overloaded, TooLarge
from container.env import ServerSettings
from container.http_protocol import length_and_attributes
from container.logs import ensure_logging
from container.manifest import MANIFEST_NAME
from container.priorities import yield_to_model
from container.responses import (
    CUSTOM_ATTRIBUTES,
    ClientGone,
    error_response,
    json_response,
    read_body,
    retry_after_headers,
    while_connected,
)
from container.service import DeadlineExceeded, InferenceService, ModelStatus, NotReady, ServiceError, TooManyWindows
from container.tasks import InputTooLong

if TYPE_CHECKING:
    from container.generation.service import GenerationService

TEXT_GENERATION = "text-generation"

log = logging.getLogger("sagebox.server")

# Inputs (questions, texts) in one request.
MAX_ITEMS = 64
# Service refusals by kind. Through InvokeEndpoint a client sees any 4xx/5xx of ours as ModelError, carrying our status
# and body (AWS SDK for Java, sagemakerruntime model package: "ModelErrorException: Model (owned by the customer in
# the container) returned 4xx or 5xx error code"): a 503 says "retry later", a 413 says retrying cannot help.
_STATUS: dict[type[Exception], int] = {
    NotReady: 503,
    Overloaded: 503,
    TooLarge: 413,
    TooManyWindows: 413,
    DeadlineExceeded: 504,
    InputTooLong: 400,
}


class InFlight:
    """/invocations requests being answered, and those the server cut off (cancelled at the drain deadline)."""

    def __init__(self) -> None:
        self.active = 0
        self.answered = 0
        self.cancelled = 0

    @property
    def cut_off(self) -> int:
        """Requests that did not finish: cancelled, or still running (their cancellation not yet delivered)."""
        return self.cancelled + self.active


class RefuseUnread:
    """ASGI middleware in front of the app: a POST /invocations that cannot fit behind the queued work, priced by its
    Content-Length, is refused (503, Retry-After, the same JSON reason) before its body is read or a Request, route
    and handler exist for it. Under a retry storm refusals are nearly all the traffic, and each costs CPU the model
    then lacks (docs/serving.md, Admission control, gives the measured cost of both paths). Everything else, and a
    request without a Content-Length, goes to the app."""

    def __init__(self, app: Starlette, service: InferenceService | GenerationService) -> None:
        self.app = app
        self.service = service
        self.state = app.state

    def refusal(self, body_bytes: int) -> tuple[bytes, int] | None:
        """(JSON body, Retry-After) of the 503 for a request of `body_bytes` arriving now; None: let it in. The
        server's HTTP protocol asks this before it builds anything for the request (container/http_protocol.py)."""
        refused = self.service.refuse_unread(body_bytes)
        if refused is None:
            return None
        return payload.error_body(503, str(refused)), refused.retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == "/invocations":
            length, echo = length_and_attributes(scope["headers"])
            refused = None if length is None else self.refusal(length)
            if refused is not None:
                body, retry_after = refused
                headers = [
                    (b"content-type", payload.JSON.encode()),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(retry_after).encode()),
                ]
                if echo is not None:
                    headers.append((CUSTOM_ATTRIBUTES.lower().encode(), echo))
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def _generates(model_dir: Path) -> bool:
    """Whether the model directory holds a text-generation model (its manifest says so); anything unreadable goes
    to the encoders' service, whose loading reports why."""
    path = model_dir / MANIFEST_NAME
    if not path.is_file():  # not there yet, or not a plain file (never block the server's start on reading it)
        return False
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("task") == TEXT_GENERATION)
    except (OSError, ValueError, AttributeError):
        return False


def create_app(
    settings: ServerSettings | None = None,
    service: InferenceService | GenerationService | None = None,
    in_flight: InFlight | None = None,
) -> RefuseUnread:
    """The app; `service` defaults to one built from `settings` (and started by the lifespan), `in_flight` counts
    /invocations requests for whoever reports the shutdown (container/server.py)."""
    settings = settings or ServerSettings.from_env()
    ensure_logging(settings.log_level)
    if service is None:  # a real server: its HTTP thread yields the CPU to the model
        favour_model = functools.partial(yield_to_model, settings.http_nice)
        if _generates(settings.model_dir):
            from container.generation.service import GenerationService

            service = GenerationService(settings, on_inference_thread=favour_model)
        else:
            service = InferenceService(settings, on_inference_thread=favour_model)
    requests = in_flight or InFlight()

    async def ping(request: Request) -> Response:
        if service.status is ModelStatus.READY:
            return json_response(200, getattr(service, "ready_body", b'{"status": "ready"}'))
        body = {"status": service.status.value, "message": service.reason or "model is loading"}
        return json_response(503, json.dumps(body).encode())

    async def invocations(request: Request) -> Response:
        requests.active += 1
        try:
            response = await _invoke(request)
        except asyncio.CancelledError:
            requests.cancelled += 1
            raise
        finally:
            requests.active -= 1
        requests.answered += 1
        return response

    async def _invoke(request: Request) -> Response:
        if not isinstance(service, InferenceService):
            from container.generation.http import invoke

            return await invoke(request, service, settings)
        arrived = service.clock.now()
        try:
            service.check_ready()
            fmt_in = payload.request_format(request.headers.get("content-type"))
            fmt_out = payload.response_format(request.headers.get("accept"))
            body = await read_body(request, settings.max_body_bytes)
            task = service.task
            parsed = payload.parse_request(body, fmt_in, MAX_ITEMS, task)
            answers = await while_connected(request, service.answer(parsed, arrived, len(body)))
            rendered, notes = task.render(parsed.items, answers, parsed.batch, parsed.parameters)
        except payload.PayloadError as exc:
            return error_response(exc.status, str(exc), request)
        except (ServiceError, Overloaded, TooLarge, InputTooLong) as exc:
            status = next((_STATUS[kind] for kind in type(exc).__mro__ if kind in _STATUS), 500)
            return error_response(status, str(exc), request, retry_after_headers(exc))
        except (ClientDisconnect, ClientGone):
            return error_response(400, "client disconnected", request)  # nobody reads it; the work was dropped
        except Exception:
            log.exception("unhandled error in /invocations")
            return error_response(500, "internal error while answering; see the server log", request)
        media = payload.JSON_LINES if fmt_out == payload.JSON_LINES else payload.JSON
        return json_response(200, payload.render(rendered, parsed.batch, fmt_out), request, media, notes.headers())

    async def stats(request: Request) -> Response:
        body = service.stats()
        body["in_flight"] = requests.active
        return json_response(200, json.dumps(body).encode())

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return error_response(status, f"{request.method} {request.url.path}: {payload.reason(status).lower()}")

    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal error; see the server log")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        log.info("loading model from %s", settings.model_dir)
        loading: asyncio.Task[None] | None = None
        if settings.workers > 1:
            # Workers share one listening socket and only accept once started: loading before that means
            # no worker ever answers /ping or /invocations while its own model is still loading.
            await service.start()
        else:
            # One process: answer /ping (503) at once and load in the background.
            loading = asyncio.create_task(service.start(), name="model-loader")
        yield
        if loading is not None and not loading.done():
            loading.cancel()
        await service.close()
        if requests.cut_off:
            log.warning("server stopped; %d in-flight request(s) were cut off at the drain deadline", requests.cut_off)
        else:
            log.info("server stopped")

    starlette = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invocations, methods=["POST"]),
            Route("/stats", stats, methods=["GET"]),
        ],
        exception_handlers={HTTPException: not_found, Exception: server_error},
        lifespan=lifespan,
    )
    starlette.state.service = service
    starlette.state.in_flight = requests
    return RefuseUnread(starlette, service)
