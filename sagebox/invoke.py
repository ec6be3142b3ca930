"""Ask an endpoint questions through boto3's sagemaker-runtime client: the same code locally and in the cloud."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

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
    extra = {"CustomAttributes": custom_attributes} if custom_attributes else {}
    if target_variant:
        extra["TargetVariant"] = target_variant
    attempt = 0
    while True:
        try:
            return _call(runtime, endpoint, body, extra)
        except ClientError as exc:
            again, retry_after_s = retryable(exc)
            if retry is None or not again or attempt + 1 >= retry.attempts:
                said = describe_client_error(endpoint, exc)
                raise SageboxError(said if attempt == 0 else f"{said} (after {attempt + 1} attempts)") from None
            retry.sleep(retry.delay(attempt, retry_after_s))
            attempt += 1


def _call(runtime: Any, endpoint: str, body: str, extra: dict[str, str]) -> bytes:
    try:
        response = runtime.invoke_endpoint(
            EndpointName=endpoint, Body=body, ContentType="application/json", Accept="application/json", **extra
        )
        payload: bytes = response["Body"].read()
    except EndpointConnectionError as exc:
        raise SageboxError(f"cannot reach the SageMaker runtime for {endpoint}: {exc}") from None
    except BotoCoreError as exc:  # no credentials, an unknown profile, ...: the user's set-up, said in one line
        setup = aws_setup_error(exc)
        if setup is None:
            raise
        raise SageboxError(setup) from None
    return payload


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
