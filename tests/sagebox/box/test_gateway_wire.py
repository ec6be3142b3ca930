"""The gateway's wire answers (sagebox.box.gateway.wire) as botocore reads them: the error code from the
`x-amzn-ErrorType` header, ModelError's modelled fields from the body, ThrottlingException as a throttle to retry;
and the payload limit at its exact boundary."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import botocore.parsers
import botocore.session
import pytest
from botocore.model import ServiceModel
from botocore.retries import standard
from starlette.requests import Request
from starlette.responses import Response

from sagebox.box.gateway import wire
from sagebox.box.routes import VariantRoute
from sagebox.box.upstream import UpstreamResponse


@pytest.fixture(scope="module")
def runtime_model() -> ServiceModel:
    return botocore.session.get_session().get_service_model("sagemaker-runtime")


def parsed(model: ServiceModel, response: Response, shape_name: str | None = None) -> dict[str, Any]:
    """What boto3's sagemaker-runtime client makes of `response` (as InvokeEndpoint's answer, or as the named
    error shape, which is how it fills a modelled exception's fields)."""
    parser = botocore.parsers.create_parser(model.protocol)
    shape = model.shape_for(shape_name) if shape_name else model.operation_model("InvokeEndpoint").output_shape
    raw = {"status_code": response.status_code, "headers": dict(response.headers), "body": bytes(response.body)}
    return dict(parser.parse(raw, shape))


def test_an_error_answer_carries_its_code_and_message_where_botocore_reads_them(runtime_model: ServiceModel) -> None:
    response = wire.aws_error(400, "ValidationError", "bad input", Extra=1)
    assert response.status_code == 400
    assert json.loads(bytes(response.body)) == {"message": "bad input", "Message": "bad input", "Extra": 1}
    error = parsed(runtime_model, response)["Error"]
    assert (error["Code"], error["Message"]) == ("ValidationError", "bad input")


def test_an_unknown_endpoint_is_a_validation_error_naming_it_and_the_account(runtime_model: ServiceModel) -> None:
    response = wire.not_found("nowhere")
    assert response.status_code == 400
    error = parsed(runtime_model, response)["Error"]
    assert error["Code"] == "ValidationError"
    assert error["Message"] == f"Endpoint nowhere of account {wire.ACCOUNT} not found."


@pytest.mark.parametrize(("status", "kind"), [(400, "client"), (499, "client"), (500, "server"), (503, "server")])
def test_a_container_error_is_a_model_error_with_its_status_message_and_log_stream(
    runtime_model: ServiceModel, status: int, kind: str
) -> None:
    response = wire.model_error("ep", "eu-west-1", UpstreamResponse(status, {}, b'{"error": "bad"}'))
    assert response.status_code == 424
    assert parsed(runtime_model, response)["Error"]["Code"] == "ModelError"
    fields = parsed(runtime_model, response, "ModelError")
    log_stream = f"arn:aws:logs:eu-west-1:{wire.ACCOUNT}:log-group:/aws/sagemaker/Endpoints/ep"
    assert fields["OriginalStatusCode"] == status
    assert fields["OriginalMessage"] == '{"error": "bad"}'
    assert fields["LogStreamArn"] == log_stream
    assert fields["Message"].startswith(f"Received {kind} error ({status}) from primary")
    assert log_stream in fields["Message"]


def test_a_model_at_capacity_passes_its_retry_after_to_the_client(runtime_model: ServiceModel) -> None:
    from botocore.exceptions import ClientError

    from sagebox.invoke import retryable

    at_capacity = UpstreamResponse(503, {"retry-after": "2"}, b'{"message": "server is at capacity"}')
    response = wire.model_error("ep", "us-east-1", at_capacity)
    assert response.headers["retry-after"] == "2"
    read = parsed(runtime_model, response)
    read.update(parsed(runtime_model, response, "ModelError"))  # botocore merges the modelled fields in
    assert retryable(ClientError(read, "InvokeEndpoint")) == (True, 2.0)  # what sagebox.invoke backs off on
    failing = parsed(runtime_model, wire.model_error("ep", "us-east-1", UpstreamResponse(500, {}, b"{}")))
    failing.update({"OriginalStatusCode": 500})
    assert retryable(ClientError(failing, "InvokeEndpoint")) == (False, None)  # a model failure is not retried
    odd = wire.model_error("ep", "us-east-1", UpstreamResponse(503, {"retry-after": "soon"}, b"{}"))
    assert "retry-after" not in odd.headers  # only delay-seconds go through


def test_a_model_error_keeps_the_first_4096_characters_of_any_body() -> None:
    long = wire.model_error("ep", "us-east-1", UpstreamResponse(500, {}, b"x" * 5000))
    assert json.loads(bytes(long.body))["OriginalMessage"] == "x" * 4096
    binary = wire.model_error("ep", "us-east-1", UpstreamResponse(500, {}, b"\xff\xfeok"))
    assert json.loads(bytes(binary.body))["OriginalMessage"] == "\ufffd\ufffdok"  # undecodable bytes replaced


def test_a_container_that_never_answered_is_a_model_error_of_504(runtime_model: ServiceModel) -> None:
    fields = parsed(runtime_model, wire.model_timeout(), "ModelError")
    assert fields["OriginalStatusCode"] == 504
    assert "60 seconds" in fields["Message"]


def test_a_throttled_serverless_call_is_one_botocore_retries_as_a_throttle(runtime_model: ServiceModel) -> None:
    response = wire.throttled("ep", VariantRoute("sv", 1.0, (), max_concurrency=2))
    assert response.status_code == 429
    answer = parsed(runtime_model, response)
    assert answer["Error"]["Code"] == "ThrottlingException"
    assert "MaxConcurrency of 2" in answer["Error"]["Message"]
    context = standard.RetryContext(attempt_number=1, parsed_response=answer)
    assert standard.ThrottledRetryableChecker().is_retryable(context)


def request(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> Request:
    pending = list(chunks)

    async def receive() -> dict[str, object]:
        chunk = pending.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    return Request({"type": "http", "method": "POST", "headers": headers, "path": "/"}, receive)


def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused() -> None:
    assert asyncio.run(wire.read_limited(request([], [b"ab", b"cd"]), 4)) == b"abcd"
    with pytest.raises(wire.BodyTooLarge, match="5\\+ bytes"):
        asyncio.run(wire.read_limited(request([], [b"ab", b"cde"]), 4))
    declared = request([(b"content-length", b"4")], [b"abcd"])
    assert asyncio.run(wire.read_limited(declared, 4)) == b"abcd"
    # A Content-Length that is not a number is no reason to refuse: the streamed size decides.
    odd = request([(b"content-length", b"lots")], [b"ab"])
    assert asyncio.run(wire.read_limited(odd, 4)) == b"ab"
