"""What the SageMaker runtime API says on the wire: its headers, its payload limit, and its error answers.

boto3 and the SageMaker SDK read an error by its `x-amzn-ErrorType` header and JSON body, so each answer here has
SageMaker's shape: `ValidationError` (400) for a bad request or an unknown endpoint, `ModelError` (424, with
OriginalStatusCode/OriginalMessage/LogStreamArn) when the container answers with an error, `ThrottlingException`
(429) past a serverless variant's MaxConcurrency, `ServiceUnavailable` (503) when no instance can answer.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response

from sagebox.box.routes import VariantRoute
from sagebox.box.upstream import UpstreamResponse

ACCOUNT = "123456789012"
MAX_PAYLOAD = 6 * 1024 * 1024
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INVOKED_VARIANT = "X-Amzn-Invoked-Production-Variant"
TARGET_VARIANT = "X-Amzn-SageMaker-Target-Variant"
# InvokeEndpointWithResponseStream's own headers, and its body's media type.
STREAM_ACCEPT = "X-Amzn-SageMaker-Accept"
STREAM_CONTENT_TYPE = "X-Amzn-SageMaker-Content-Type"
EVENT_STREAM = "application/vnd.amazon.eventstream"
COLD_START = "X-Sagebox-Cold-Start-Ms"


class BodyTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"Request payload of {size}+ bytes exceeds the 6 MB limit.")


async def read_limited(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes `limit` bytes (by Content-Length, or while streaming)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


def aws_error(status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: object) -> Response:
    body = {"message": message, "Message": message, **extra}
    return Response(
        json.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={
            "x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.sagemaker/",
            **(headers or {}),
        },
    )


def not_found(name: str) -> Response:
    return aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")


def throttled(name: str, variant: VariantRoute) -> Response:
    """SageMaker's answer past a serverless variant's MaxConcurrency: 429 ThrottlingException (boto3 retries it
    as a throttling error)."""
    return aws_error(
        429,
        "ThrottlingException",
        f"Rate exceeded: serverless variant {variant.name} of endpoint {name} is serving its MaxConcurrency of "
        f"{variant.max_concurrency} invocation(s); retry after a brief wait.",
    )


def model_error(name: str, region: str, upstream: UpstreamResponse) -> Response:
    """The container answered with an error: ModelError, with its status and message and the endpoint's log stream."""
    log_stream = f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/{name}"
    original = upstream.body.decode("utf-8", errors="replace")[:4096]
    kind = "client" if upstream.status_code < 500 else "server"
    message = (
        f'Received {kind} error ({upstream.status_code}) from primary with message "{original}". '
        f"See {log_stream} in account {ACCOUNT} for more information."
    )
    # The container's Retry-After (its 503 at capacity says when to come back) reaches the caller with the
    # ModelError, beside OriginalStatusCode: sagebox.invoke and the invoke scripts back off on it.
    retry = upstream.headers.get("retry-after")
    return aws_error(
        424,
        "ModelError",
        message,
        {"Retry-After": retry} if retry is not None and retry.isdigit() else None,
        OriginalStatusCode=upstream.status_code,
        OriginalMessage=original,
        LogStreamArn=log_stream,
    )


def model_timeout() -> Response:
    return aws_error(424, "ModelError", "Model container did not respond within 60 seconds.", OriginalStatusCode=504)
