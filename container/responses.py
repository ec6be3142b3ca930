"""HTTP pieces both /invocations handlers share (the encoders' in container/app.py, text generation's in
container/generation/http.py): JSON answers and errors that echo SageMaker's custom attributes, Retry-After, bodies
read within the limit, and work that stops when its client goes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive

from container import payload

CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"

T = TypeVar("T")


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


def json_response(
    status: int,
    body: bytes,
    request: Request | None = None,
    media: str = payload.JSON,
    extra: dict[str, str] | None = None,
) -> Response:
    headers = dict(extra or {})
    if request is not None and CUSTOM_ATTRIBUTES in request.headers:
        headers[CUSTOM_ATTRIBUTES] = request.headers[CUSTOM_ATTRIBUTES]
    return Response(body, status_code=status, media_type=media, headers=headers)


def error_response(
    status: int, message: str, request: Request | None = None, extra: dict[str, str] | None = None
) -> Response:
    return json_response(status, payload.error_body(status, message), request, extra=extra)


def retry_after_headers(exc: Exception) -> dict[str, str] | None:
    """`Retry-After` for a 503 a retry can cure (at capacity, loading, shutting down): the seconds the refusal
    priced. Clients that back off on it (the invoke scripts; the box's gateway passes it on with the ModelError)
    keep a retry storm from costing the model its CPU."""
    seconds = getattr(exc, "retry_after_s", None)
    return None if seconds is None else {"Retry-After": str(seconds)}


async def read_body(request: Request, limit: int) -> bytes:
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


async def disconnected(receive: Receive) -> None:
    """Returns once the client has gone (the body is read by then, so nothing else arrives)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def while_connected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientGone (and `work` cancelled) as soon as the client disconnects.

    The watch is ASGI's own signal: after the body, `receive()` returns `http.disconnect` once the connection
    closes (Starlette's streaming responses watch the same way); uvicorn does not cancel a handler by itself.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(disconnected(request.receive))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if watcher.done() and not watcher.cancelled():
        watcher.exception()  # a receive() that failed also means the client is gone; retrieved, so never logged
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await task  # let the service take its queued work back before answering
        raise ClientGone
    return task.result()
