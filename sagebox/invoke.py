"""Ask an endpoint questions through boto3's sagemaker-runtime client: the same code locally and in the cloud; a
text-generation endpoint's answer whole or streamed (InvokeEndpointWithResponseStream)."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, EventStreamError

from sagebox.errors import SageboxError, aws_setup_error


@dataclass(frozen=True)
class Retry:
    """Bounded retries of a model's 503 (at capacity, loading, shutting down), which reaches a client as a ModelError
    (OriginalStatusCode 503) that boto3 itself never retries. Its throttling and 5xx answers are boto3's own retry
    handler's.

    The delay: the container's `Retry-After` when it sent one (never sooner, up to half as long again, so clients
    refused together do not come back together); else "full jitter" exponential backoff, random(0, min(cap, base *
    2^attempt)), the strategy the AWS SDKs' standard retry mode uses (AWS SDKs and Tools Reference Guide, "Retry
    behavior"; AWS Architecture Blog, "Exponential Backoff And Jitter"). `attempts` counts the first call too, three
    as in that mode.
    """

    attempts: int = 3
    base_s: float = 0.5
    cap_s: float = 20.0
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait after failed attempt number `attempt` (0 for the first call)."""
        if retry_after_s is not None:
            return retry_after_s * (1.0 + 0.5 * self.rng.random())
        return self.rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0**attempt))


def retryable(exc: ClientError) -> tuple[bool, float | None]:
    """(whether the model's answer says a retry can succeed, its Retry-After in seconds if it gave one)."""
    error = exc.response.get("Error", {})
    if error.get("Code") != "ModelError" or str(exc.response.get("OriginalStatusCode")) != "503":
        return False, None
    header = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("retry-after", "")
    return True, float(header) if header.isdigit() else None


@dataclass(frozen=True)
class Invocation:
    question: str
    answer: str
    score: float
    start: int
    end: int
    latency_ms: float


@dataclass(frozen=True)
class JsonInvocation:
    body: Any  # the decoded JSON answer
    latency_ms: float


def invoke_json(
    runtime: Any,
    endpoint: str,
    request: Any,
    custom_attributes: str | None = None,
    *,
    target_variant: str | None = None,
    retry: Retry | None = None,
) -> JsonInvocation:
    """Any task's request (the Hugging Face inference toolkit's {"inputs", "parameters"}; a str is sent as it is) and
    its JSON answer; `target_variant` picks one production variant; `retry`: back off and retry a model at capacity
    (None: one call, as a benchmark wants)."""
    started = time.perf_counter()
    body = request if isinstance(request, str) else json.dumps(request)
    payload = _invoke(runtime, endpoint, body, custom_attributes, target_variant, retry)
    return JsonInvocation(json.loads(payload), (time.perf_counter() - started) * 1000.0)


def invoke_qa(
    runtime: Any,
    endpoint: str,
    question: str,
    context: str,
    custom_attributes: str | None = None,
    retry: Retry | None = None,
) -> Invocation:
    started = time.perf_counter()
    body = json.dumps({"question": question, "context": context})
    payload = _invoke(runtime, endpoint, body, custom_attributes, None, retry)
    latency_ms = (time.perf_counter() - started) * 1000.0
    answer = json.loads(payload)
    return Invocation(
        question, answer["answer"], float(answer["score"]), int(answer["start"]), int(answer["end"]), latency_ms
    )


def _invoke(
    runtime: Any,
    endpoint: str,
    body: str,
    custom_attributes: str | None,
    target_variant: str | None = None,
    retry: Retry | None = None,
) -> bytes:
    """InvokeEndpoint's response body; every failure is one SageboxError line."""
    extra = _extra(custom_attributes, target_variant)

    def call() -> bytes:
        response = runtime.invoke_endpoint(
            EndpointName=endpoint, Body=body, ContentType="application/json", Accept="application/json", **extra
        )
        payload: bytes = response["Body"].read()
        return payload

    return _with_retries(endpoint, call, retry)


def _extra(custom_attributes: str | None, target_variant: str | None) -> dict[str, str]:
    extra = {"CustomAttributes": custom_attributes} if custom_attributes else {}
    if target_variant:
        extra["TargetVariant"] = target_variant
    return extra


T = TypeVar("T")


def _with_retries(endpoint: str, call: Callable[[], T], retry: Retry | None) -> T:
    """`call()`'s result; a refusal a retry can cure (ModelError 503, throttling) retried as `retry` says, every
    failure one SageboxError line."""
    attempt = 0
    while True:
        try:
            return call()
        except EndpointConnectionError as exc:
            raise SageboxError(f"cannot reach the SageMaker runtime for {endpoint}: {exc}") from None
        except BotoCoreError as exc:  # no credentials, an unknown profile, ...: the user's set-up, said in one line
            setup = aws_setup_error(exc)
            if setup is None:
                raise
            raise SageboxError(setup) from None
        except ClientError as exc:
            again, retry_after_s = retryable(exc)
            if retry is None or not again or attempt + 1 >= retry.attempts:
                said = describe_client_error(endpoint, exc)
                raise SageboxError(said if attempt == 0 else f"{said} (after {attempt + 1} attempts)") from None
            retry.sleep(retry.delay(attempt, retry_after_s))
            attempt += 1


def describe_client_error(endpoint: str, exc: ClientError) -> str:
    error = exc.response.get("Error", {})
    code = error.get("Code", "Error")
    if code == "ModelError":
        original = exc.response.get("OriginalStatusCode", "?")
        detail = exc.response.get("OriginalMessage", error.get("Message", ""))
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("message", detail)
        return f"endpoint {endpoint}: the model answered {original}: {detail}"
    return f"endpoint {endpoint}: {code}: {error.get('Message', '')}"


# --- text generation ----------------------------------------------------------------------------------------------


def generation_request(
    *,
    prompt: str | None = None,
    messages: str | list[Any] | None = None,
    inputs: str | None = None,
    max_tokens: int | None = None,
    parameters: dict[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """A text-generation endpoint's request: a chat (the Messages API: `prompt` as one user message, or `messages`,
    JSON text or a list) or a prompt to continue (TGI's `{"inputs", "parameters"}`). `parameters` are the chat's
    other fields (temperature, top_p, seed, stop, ...) or TGI's parameters."""
    given = [name for name, value in (("prompt", prompt), ("messages", messages), ("inputs", inputs)) if value]
    if len(given) != 1:
        said = "none" if not given else " and ".join(given)
        raise SageboxError(f"text generation takes one of a prompt, messages or inputs (got {said})")
    if max_tokens is not None and max_tokens < 1:
        raise SageboxError(f"the maximum of new tokens must be at least 1, got {max_tokens}")
    extra = dict(parameters or {})
    if inputs:
        tgi = {**({"max_new_tokens": max_tokens} if max_tokens is not None else {}), **extra}
        return {"inputs": inputs, **({"parameters": tgi} if tgi else {}), "stream": stream}
    chat = [{"role": "user", "content": prompt}] if prompt else _messages(messages)
    limit = {"max_tokens": max_tokens} if max_tokens is not None else {}
    return {"messages": chat, **limit, **extra, "stream": stream}


def _messages(value: str | list[Any] | None) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise SageboxError(f"the messages are not JSON: {exc.msg} at character {exc.pos}") from None
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) and "role" in m for m in value):
        raise SageboxError('the messages must be a JSON list of {"role": ..., "content": ...} objects')
    return value


def generated_text(answer: Any) -> str:
    """The text of a non-streamed generation answer: a chat.completion's message, or TGI's generated_text."""
    if isinstance(answer, dict) and isinstance(answer.get("choices"), list) and answer["choices"]:
        message = answer["choices"][0].get("message") or {}
        return str(message.get("content") or "")
    if isinstance(answer, list) and answer and isinstance(answer[0], dict) and "generated_text" in answer[0]:
        return str(answer[0]["generated_text"])
    return json.dumps(answer, ensure_ascii=False)


def payload_parts(events: Iterable[Any]) -> Iterator[bytes]:
    """The bytes of InvokeEndpointWithResponseStream's PayloadPart events (botocore raises the error events)."""
    for event in events:
        part = event.get("PayloadPart") if isinstance(event, dict) else None
        if part is not None:
            yield bytes(part.get("Bytes") or b"")


def invoke_stream(
    runtime: Any,
    endpoint: str,
    request: Any,
    custom_attributes: str | None = None,
    *,
    target_variant: str | None = None,
    retry: Retry | None = None,
) -> Iterator[str]:
    """A text-generation endpoint's answer through InvokeEndpointWithResponseStream, piece by piece as the tokens
    arrive (TGI's token events or chat chunks, re-split from PayloadParts cut anywhere: sagebox/sse.py). A refusal
    before the stream (ModelError: a 503 is retried with `retry`), a stream that breaks (ModelStreamError) or
    carries an error event: one SageboxError line."""
    from sagebox.sse import StreamFailed, stream_text

    body = request if isinstance(request, str) else json.dumps(request)
    extra = _extra(custom_attributes, target_variant)

    def call() -> Any:
        return runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint, Body=body, ContentType="application/json", **extra
        )

    response = _with_retries(endpoint, call, retry)
    try:
        yield from stream_text(payload_parts(response["Body"]))
    except EventStreamError as exc:
        raise SageboxError(describe_stream_error(endpoint, exc)) from None
    except StreamFailed as exc:
        raise SageboxError(f"endpoint {endpoint}: the generation failed mid-stream: {exc}") from None
    except BotoCoreError as exc:  # the connection dropped or timed out mid-stream
        raise SageboxError(f"endpoint {endpoint}: the stream broke: {exc}") from None


def describe_stream_error(endpoint: str, exc: ClientError) -> str:
    """A stream that broke after it began (ModelStreamError, InternalStreamFailure), in one line."""
    error = exc.response.get("Error", {})
    message = " ".join(str(error.get("Message", "")).split())
    return f"endpoint {endpoint}: the stream broke: {error.get('Code', 'Error')}: {message}"


def write_pieces(pieces: Iterable[str], out: TextIO) -> str:
    """Write each piece as it comes (flushed), then a newline; returns the whole text. When the pieces stop with an
    error, the newline still ends what was printed, so the error's line stands on its own."""
    text: list[str] = []
    try:
        for piece in pieces:
            out.write(piece)
            out.flush()
            text.append(piece)
    finally:
        if text and not text[-1].endswith("\n"):
            out.write("\n")
            out.flush()
    return "".join(text)
