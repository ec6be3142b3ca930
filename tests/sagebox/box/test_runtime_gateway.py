"""boto3's sagemaker-runtime client against the local runtime gateway and real serving processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import pytest
from botocore.exceptions import ClientError

from sagebox.box import processes, runtime_gateway
from sagebox.box.routes import Route, VariantRoute, save_routes
from sagebox.local_server import LocalServer, free_port
from tests.conftest import minilm_tokenizer_path
from tests.container.toy_model import FAIL_WORD, build_toy_model_dir

QUESTION = {"question": "Which basin?", "context": "The Amazon rainforest covers the Amazon basin."}


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    model_dir = build_toy_model_dir(tmp_path_factory.mktemp("toy") / "model", minilm_tokenizer_path())
    with LocalServer.start(model_dir, tmp_path_factory.mktemp("logs") / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def gateway(backend: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    routes = tmp_path_factory.mktemp("routes") / "routes.json"
    dead = free_port()
    save_routes(
        routes,
        {
            "qa-int8": Route("qa-int8", (VariantRoute("AllTraffic", 1.0, (backend.url,)),)),
            "qa-down": Route("qa-down", (VariantRoute("AllTraffic", 1.0, (f"http://127.0.0.1:{dead}",)),)),
        },
    )
    url, pid = runtime_gateway.spawn(routes, routes.parent / "gateway.log")
    try:
        yield url
    finally:
        processes.stop(pid)


def runtime(url: str) -> Any:
    return boto3.client(
        "sagemaker-runtime",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def test_invoke_endpoint_returns_the_containers_answer(gateway: str, backend: LocalServer) -> None:
    response = runtime(gateway).invoke_endpoint(
        EndpointName="qa-int8",
        Body=json.dumps(QUESTION),
        ContentType="application/json",
        Accept="application/json",
        CustomAttributes="request-id=42",
    )
    body = json.loads(response["Body"].read())
    assert QUESTION["context"][body["start"] : body["end"]] == body["answer"]
    assert response["ContentType"].startswith("application/json")
    assert response["CustomAttributes"] == "request-id=42"
    assert response["InvokedProductionVariant"] == "AllTraffic"


def test_invoke_endpoint_with_response_stream_returns_the_answer_as_payload_parts(gateway: str) -> None:
    response = runtime(gateway).invoke_endpoint_with_response_stream(
        EndpointName="qa-int8",
        Body=json.dumps(QUESTION),
        ContentType="application/json",
        Accept="application/json",
        CustomAttributes="request-id=7",
    )
    events = list(response["Body"])  # botocore's own event-stream parser checks every CRC
    assert events and all(set(event) == {"PayloadPart"} for event in events)
    body = json.loads(b"".join(event["PayloadPart"]["Bytes"] for event in events))
    assert QUESTION["context"][body["start"] : body["end"]] == body["answer"]
    assert response["ContentType"].startswith("application/json")
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert response["CustomAttributes"] == "request-id=7"


def test_a_streamed_invocation_the_container_refuses_is_a_model_error(gateway: str) -> None:
    client = runtime(gateway)
    with pytest.raises(client.exceptions.ModelError) as err:
        client.invoke_endpoint_with_response_stream(
            EndpointName="qa-int8", Body=json.dumps(QUESTION), ContentType="application/json", Accept="text/csv"
        )
    assert err.value.response["OriginalStatusCode"] == 406


def test_unknown_endpoint_is_a_validation_error(gateway: str) -> None:
    with pytest.raises(ClientError) as err:
        runtime(gateway).invoke_endpoint(EndpointName="nope", Body=b"{}", ContentType="application/json")
    assert err.value.response["Error"]["Code"] == "ValidationError"
    assert "Endpoint nope of account" in err.value.response["Error"]["Message"]
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize(
    ("parameters", "fragment"),
    [
        ({"CustomAttributes": "x" * 1025}, "at 'customAttributes' failed to satisfy constraint"),
        ({"InferenceId": "i" * 65}, "at 'inferenceId' failed to satisfy constraint"),
        ({"TargetVariant": "All_Traffic"}, "at 'targetVariant' failed to satisfy constraint"),
    ],
)
def test_parameters_that_break_the_apis_constraints_are_validation_errors(
    gateway: str, parameters: dict[str, str], fragment: str
) -> None:
    # botocore checks none of these bounds on the client; SageMaker does, before the container sees the request.
    with pytest.raises(ClientError) as err:
        runtime(gateway).invoke_endpoint(
            EndpointName="qa-int8", Body=json.dumps(QUESTION), ContentType="application/json", **parameters
        )
    assert err.value.response["Error"]["Code"] == "ValidationError"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert err.value.response["Error"]["Message"].startswith("1 validation error detected: ")
    assert fragment in err.value.response["Error"]["Message"]


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (json.dumps({"question": f"{FAIL_WORD}?", "context": "x y z"}), "application/json", 500),
        ("{broken", "application/json", 400),
        ("a,b", "text/csv", 415),
    ],
)
def test_container_errors_are_model_errors(gateway: str, body: str, content_type: str, status: int) -> None:
    client = runtime(gateway)
    with pytest.raises(client.exceptions.ModelError) as err:
        client.invoke_endpoint(EndpointName="qa-int8", Body=body, ContentType=content_type)
    response = err.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert response["OriginalStatusCode"] == status
    assert json.loads(response["OriginalMessage"])["status"] == status
    assert response["LogStreamArn"].endswith("/aws/sagemaker/Endpoints/qa-int8")


def test_unreachable_endpoint_is_service_unavailable(gateway: str) -> None:
    with pytest.raises(ClientError) as err:
        runtime(gateway).invoke_endpoint(
            EndpointName="qa-down", Body=json.dumps(QUESTION), ContentType="application/json"
        )
    assert err.value.response["Error"]["Code"] == "ServiceUnavailable"


def test_route_table_is_reread_when_it_changes(gateway: str, backend: LocalServer, tmp_path: Path) -> None:
    from sagebox.box.routes import RouteTable

    path = tmp_path / "routes.json"
    table = RouteTable(path)
    assert table.get("a") is None
    save_routes(path, {"a": Route("a", (VariantRoute("AllTraffic", 1.0, (backend.url,)),))})
    route = table.get("a")
    assert route is not None and route.variants[0].urls == (backend.url,)
    save_routes(path, {})
    assert table.get("a") is None
