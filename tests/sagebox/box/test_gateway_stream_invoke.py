"""`sagebox invoke --stream` and sagebox.invoke.invoke_stream through the box's runtime gateway to a real
text-generation server: the streamed text is the non-streamed answer's, and a container that dies mid-stream ends
the command with one ModelStreamError line and exit 1."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagebox.box import processes, runtime_gateway
from sagebox.box.routes import Route, VariantRoute, save_routes
from sagebox.cli.app import main
from sagebox.errors import SageboxError
from sagebox.invoke import invoke_stream
from sagebox.local_server import LocalServer
from tests.container.generation.model_dir import write_model_dir
from tests.sagebox.box.test_runtime_gateway import runtime

ENV = {"SAGEBOX_INTRA_OP_THREADS": "1", "SAGEBOX_SERVICE_USER": ""}


def _spawn_gateway(work: Path, backend_url: str) -> tuple[str, int]:
    routes = work / "routes.json"
    save_routes(routes, {"llm": Route("llm", (VariantRoute("AllTraffic", 1.0, (backend_url,)),))})
    return runtime_gateway.spawn(routes, work / "gateway.log")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("stream-invoke")
    model_dir = write_model_dir(work / "model", "llama")  # its greedy text is not empty (gpt2's is)
    with LocalServer.start(model_dir, work / "server.log", env=ENV) as server:
        url, pid = _spawn_gateway(work, server.url)
        try:
            yield url
        finally:
            processes.stop(pid)


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No local box (another state directory), local credentials: the CLI talks to the given runtime URL."""
    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.parametrize(
    "request_args",
    [["--inputs", "Once upon a time", "--max-tokens", "48"], ["--prompt", "Hi", "--max-tokens", "24"]],
    ids=["tgi", "chat"],
)
def test_streamed_text_is_the_whole_answers(
    gateway: str, cli_env: None, request_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--endpoint", "llm", "--runtime-url", gateway, "--region", "us-east-1"]
    greedy = ["--parameters", '{"temperature": 0}'] if "--prompt" in request_args else []
    assert main(["invoke", *where, *request_args, *greedy]) == 0
    whole = capsys.readouterr().out
    assert main(["invoke", "--stream", *where, *request_args, *greedy]) == 0
    streamed = capsys.readouterr()
    assert streamed.out == whole and len(whole.strip()) > 5 and streamed.err == ""


def test_a_container_that_dies_mid_stream_is_one_line(tmp_path: Path) -> None:
    model_dir = write_model_dir(tmp_path / "model", "llama", context=4096)
    with LocalServer.start(model_dir, tmp_path / "doomed.log", env={**ENV, "MAX_TOTAL_TOKENS": "4096"}) as doomed:
        url, pid = _spawn_gateway(tmp_path, doomed.url)
        try:
            request = {"inputs": "Once upon a time", "parameters": {"max_new_tokens": 4000}, "stream": True}
            pieces = invoke_stream(runtime(url), "llm", request)
            next(pieces)  # the first tokens arrived
            os.kill(doomed.process.pid, signal.SIGKILL)
            with pytest.raises(SageboxError) as err:
                for _ in pieces:
                    pass
            message = str(err.value)
            assert message.startswith("endpoint llm: the stream broke: ModelStreamError") and "\n" not in message
        finally:
            processes.stop(pid)
