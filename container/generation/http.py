"""POST /invocations for a text-generation model: JSON in, a JSON answer or server-sent events out.

The body is JSON (UTF-8) in either payload of container/generation/request.py. Without `"stream": true` the answer is
TGI's `[{"generated_text", ...}]` or a `chat.completion`; with it, `text/event-stream` written event by event as the
engine decodes each token (Starlette's StreamingResponse sends each chunk as it is yielded, chunked HTTP/1.1), which is
what SageMaker's InvokeEndpointWithResponseStream relays as PayloadPart events. A client that disconnects cancels its
generation: its cache slot is free at the engine's next step. Errors before the first byte are JSON with a status
(400 bad input, 413, 415, 503 with Retry-After); a failure after the stream began ends it with an error event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from container import payload
from container.admission import Overloaded
from container.env import ServerSettings
from container.generation.events import (
    DONE,
    ChatIds,
    Outcome,
    Token,
    chat_chunk,
    chat_completion,
    chat_usage_chunk,
    error_event,
    tgi_answer,
    tgi_token_event,
)
from container.generation.request import CHAT, GenerationRequest, parse_request
from container.generation.service import Failed, GenerationService, GenerationStream
from container.responses import (
    CUSTOM_ATTRIBUTES,
    ClientGone,
    error_response,
    json_response,
    read_body,
    retry_after_headers,
    while_connected,
)
from container.service import ServiceError
from container.tasks.base import BadInput, BadParameters, InputTooLong

log = logging.getLogger("sagebox.server")
EVENT_STREAM = "text/event-stream"


def _decode_json(body: bytes, content_type: str | None) -> object:
    media = (content_type or payload.JSON).split(";")[0].strip().lower()
    if media not in (payload.JSON, "*/*", ""):
        raise payload.PayloadError(415, f"text generation takes application/json, not {media}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise payload.PayloadError(400, f"the body is not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise payload.PayloadError(400, "the body is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise payload.PayloadError(400, f"the body is not valid JSON: {exc.msg} at character {exc.pos}") from None


async def invoke(request: Request, service: GenerationService, settings: ServerSettings) -> Response:
    arrived = service.clock.now()
    try:
        service.check_ready()
        body = await read_body(request, settings.max_body_bytes)
        parsed = parse_request(_decode_json(body, request.headers.get("content-type")), service.request_limits())
        stream = service.generate(parsed, arrived)
    except payload.PayloadError as exc:
        return error_response(exc.status, str(exc), request)
    except (BadInput, BadParameters, InputTooLong) as exc:
        return error_response(400, str(exc), request)
    except (ServiceError, Overloaded) as exc:
        return error_response(503, str(exc), request, retry_after_headers(exc))
    except ClientDisconnect:
        return error_response(400, "client disconnected", request)
    except Exception:
        log.exception("unhandled error in /invocations")
        return error_response(500, "internal error while answering; see the server log", request)
    echo = {CUSTOM_ATTRIBUTES: request.headers[CUSTOM_ATTRIBUTES]} if CUSTOM_ATTRIBUTES in request.headers else {}
    if parsed.stream:
        events = _chat_events(stream, parsed) if parsed.api == CHAT else _tgi_events(stream)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **echo}
        return StreamingResponse(_cancelling(events, stream), media_type=EVENT_STREAM, headers=headers)
    try:
        outcome = await while_connected(request, stream.outcome())
    except ClientGone:
        stream.cancel()
        return error_response(400, "client disconnected", request)
    except Failed as exc:
        return error_response(500, str(exc), request)
    except asyncio.CancelledError:
        stream.cancel()
        raise
    if parsed.api == CHAT:
        answer: object = chat_completion(_chat_ids(parsed), outcome)
    else:
        answer = tgi_answer(outcome, stream.prompt, parsed.details, parsed.return_full_text)
    return json_response(200, json.dumps(answer, ensure_ascii=False).encode(), request)


async def _cancelling(events: AsyncIterator[bytes], stream: GenerationStream) -> AsyncIterator[bytes]:
    """The events, and the generation cancelled if the response ends early (the client went: Starlette cancels
    the body's iteration when it sees the disconnect)."""
    try:
        async for event in events:
            yield event
    finally:
        stream.cancel()


async def _tgi_events(stream: GenerationStream) -> AsyncIterator[bytes]:
    index, streamed = 0, ""
    try:
        async for item in stream.events():
            if isinstance(item, Token):
                yield tgi_token_event(index, item)
                index, streamed = index + 1, streamed + item.text
                continue
            final = item.final_token or _closing_token(item, streamed)
            yield tgi_token_event(index, final, item)
    except Failed as exc:
        yield error_event(str(exc))


def _closing_token(outcome: Outcome, streamed: str) -> Token:
    """The last event of a generation no token ended (its deadline): the text no event carried yet, if any."""
    rest = outcome.unstreamed(streamed)
    last = outcome.tokens[-1].id if outcome.tokens else -1
    return Token(last, rest, 0.0, special=not rest)


def _chat_ids(parsed: GenerationRequest) -> ChatIds:
    return ChatIds(f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time()), parsed.model or "sagebox")


async def _chat_events(stream: GenerationStream, parsed: GenerationRequest) -> AsyncIterator[bytes]:
    ids = _chat_ids(parsed)
    yield chat_chunk(ids, "", first=True)
    streamed = ""
    try:
        async for item in stream.events():
            if isinstance(item, Token):
                if item.text:
                    yield chat_chunk(ids, item.text)
                    streamed += item.text
                continue
            rest = item.unstreamed(streamed)
            if rest:
                yield chat_chunk(ids, rest)
            yield chat_chunk(ids, None, finish_reason=item.finish_reason)
            if parsed.include_usage:
                yield chat_usage_chunk(ids, item)
            yield DONE
    except Failed as exc:
        yield error_event(str(exc))
