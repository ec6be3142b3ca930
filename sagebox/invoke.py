"""Ask an endpoint questions through boto3's sagemaker-runtime client: the same code locally and in the cloud."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from sagebox.errors import SageboxError, aws_setup_error


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
) -> JsonInvocation:
    """Any task's request (the Hugging Face inference toolkit's {"inputs", "parameters"}; a str is sent as it is) and
    its JSON answer; `target_variant` picks one production variant."""
    started = time.perf_counter()
    body = request if isinstance(request, str) else json.dumps(request)
    payload = _invoke(runtime, endpoint, body, custom_attributes, target_variant)
    return JsonInvocation(json.loads(payload), (time.perf_counter() - started) * 1000.0)


def invoke_qa(
    runtime: Any, endpoint: str, question: str, context: str, custom_attributes: str | None = None
) -> Invocation:
    started = time.perf_counter()
    payload = _invoke(runtime, endpoint, json.dumps({"question": question, "context": context}), custom_attributes)
    latency_ms = (time.perf_counter() - started) * 1000.0
    answer = json.loads(payload)
    return Invocation(
        question, answer["answer"], float(answer["score"]), int(answer["start"]), int(answer["end"]), latency_ms
    )


def _invoke(
    runtime: Any, endpoint: str, body: str, custom_attributes: str | None, target_variant: str | None = None
) -> bytes:
    """InvokeEndpoint's response body; every failure is one SageboxError line."""
    extra = {"CustomAttributes": custom_attributes} if custom_attributes else {}
    if target_variant:
        extra["TargetVariant"] = target_variant
    try:
        response = runtime.invoke_endpoint(
            EndpointName=endpoint, Body=body, ContentType="application/json", Accept="application/json", **extra
        )
        payload: bytes = response["Body"].read()
    except ClientError as exc:
        raise SageboxError(describe_client_error(endpoint, exc)) from None
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
