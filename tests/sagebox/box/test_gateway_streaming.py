"""InvokeEndpointWithResponseStream through the box's gateway to a real text-generation server: PayloadPart events
relayed as the container writes them, the same text as InvokeEndpoint's, and ModelStreamError when the container
dies mid-stream. boto3's own event-stream parser reads every event."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import EventStreamError

from sagebox.box import processes, runtime_gateway
from sagebox.box.routes import Route, VariantRoute, save_routes
from sagebox.local_server import LocalServer
from tests.container.generation.model_dir import write_model_dir
from tests.sagebox.box.test_runtime_gateway import runtime

PROMPT = "Once upon a time"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("gen") / "model", "gpt2")


@pytest.fixture(scope="module")
def backend(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    env = {"SAGEBOX_INTRA_OP_THREADS": "1", "SAGEBOX_SERVICE_USER": ""}
    with LocalServer.start(model_dir, tmp_path_factory.mktemp("logs") / "server.log", env=env) as server:
        yield server


def _gateway(routes_dir: Path, url: str) -> tuple[str, int]:
    routes = routes_dir / "routes.json"
    save_routes(routes, {"llm": Route("llm", (VariantRoute("AllTraffic", 1.0, (url,)),))})
    return runtime_gateway.spawn(routes, routes_dir / "gateway.log")


@pytest.fixture(scope="module")
def gateway(backend: LocalServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url, pid = _gateway(tmp_path_factory.mktemp("routes"), backend.url)
    try:
        yield url
    finally:
        processes.stop(pid)


def _lines(parts: list[bytes]) -> list[str]:
    """Server-sent events' data lines; part boundaries are arbitrary, so the bytes are re-split (as LangChain's and
    LiteLLM's SageMaker clients do)."""
    return [line.removeprefix("data: ") for line in b"".join(parts).decode().split("\n\n") if line]


def test_tokens_stream_as_payload_parts_and_add_up_to_the_whole_answer(gateway: str) -> None:
    client = runtime(gateway)
    body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 128}}
    whole = json.loads(
        client.invoke_endpoint(EndpointName="llm", Body=json.dumps(body), ContentType="application/json")["Body"].read()
    )
    response = client.invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=json.dumps({**body, "stream": True}), ContentType="application/json"
    )
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"]]
    assert response["ContentType"].startswith("text/event-stream")
    events = [json.loads(line) for line in _lines(parts)]
    assert len(parts) >= 16  # relayed as written, not gathered into one part at the end
    assert "".join(e["token"]["text"] for e in events) == events[-1]["generated_text"] == whole[0]["generated_text"]


def test_chat_chunks_through_the_gateway_validate_as_openai_types(gateway: str) -> None:
    from openai.types.chat import ChatCompletionChunk

    chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 20, "temperature": 0, "stream": True}
    response = runtime(gateway).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=json.dumps(chat), ContentType="application/json"
    )
    lines = _lines([event["PayloadPart"]["Bytes"] for event in response["Body"]])
    assert lines[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate_json(line) for line in lines[:-1]]
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_a_container_that_dies_mid_stream_ends_it_with_model_stream_error(tmp_path: Path) -> None:
    # 4,000 tokens to generate: the container is killed long before it could finish (its whole answer takes
    # seconds; the first event reaches the client in milliseconds).
    model_dir = write_model_dir(tmp_path / "model", "llama", context=4096)
    env = {"SAGEBOX_INTRA_OP_THREADS": "1", "SAGEBOX_SERVICE_USER": "", "MAX_TOTAL_TOKENS": "4096"}
    with LocalServer.start(model_dir, tmp_path / "doomed.log", env=env) as doomed:
        url, pid = _gateway(tmp_path, doomed.url)
        try:
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 4000}, "stream": True}
            response = runtime(url).invoke_endpoint_with_response_stream(
                EndpointName="llm", Body=json.dumps(body), ContentType="application/json"
            )
            stream: Any = iter(response["Body"])
            first = next(stream)
            assert "PayloadPart" in first
            os.kill(doomed.process.pid, signal.SIGKILL)
            with pytest.raises(EventStreamError) as err:
                for _ in stream:
                    pass
            assert err.value.response["Error"]["Code"] == "ModelStreamError"
            assert "stream broke" in err.value.response["Error"]["Message"]
        finally:
            processes.stop(pid)
