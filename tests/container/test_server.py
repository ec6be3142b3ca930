"""The real serving process over HTTP: every status code, readiness, refusal, buckets, windows, SIGTERM.

Micro-batching, the timeout (504) and admission control are tested in-process with a gated model and an
injected clock (test_service.py, test_app.py): no test here orders events by sleeping."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from container.predictor import Predictor
from tests.conftest import minilm_tokenizer_path
from tests.container.server_process import STARTED, ServerProcess, start_server
from tests.container.toy_model import FAIL_WORD, build_toy_model_dir

CONTEXT = "The Amazon rainforest covers much of the Amazon basin of South America."
QUESTION = {"question": "Which basin does the rainforest cover?", "context": CONTEXT}


@pytest.fixture(scope="session")
def toy_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_toy_model_dir(tmp_path_factory.mktemp("toy") / "model", minilm_tokenizer_path())


@pytest.fixture(scope="module")
def server(toy_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(toy_model_dir, tmp_path_factory.mktemp("logs") / "server.log")
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.terminate()


def stats(server: ServerProcess) -> dict:
    with server.client() as client:
        return client.get("/stats").json()


def calls(stats_body: dict, bucket: int) -> int:
    return sum(stats_body["model_calls"].get(str(bucket), {}).values())


def post(server: ServerProcess, body: bytes | str, content_type: str = "application/json", **headers: str):
    with server.client() as client:
        return client.post("/invocations", content=body, headers={"Content-Type": content_type, **headers})


def assert_error(response: httpx.Response, status: int, fragment: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status
    assert fragment in body["message"]
    assert "Traceback" not in response.text


# --- answers -------------------------------------------------------------------------------------------------


def test_single_question_answers_with_a_span_of_the_context(server: ServerProcess) -> None:
    response = post(server, json.dumps(QUESTION))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"answer", "score", "start", "end"}
    assert 0 <= body["start"] <= body["end"] <= len(CONTEXT)
    assert CONTEXT[body["start"] : body["end"]] == body["answer"]
    assert 0.0 < body["score"] <= 1.0


def test_batch_list_answers_in_order(server: ServerProcess) -> None:
    other = {"question": "Where?", "context": "Manaus lies on the Rio Negro."}
    single = [post(server, json.dumps(q)).json() for q in (QUESTION, other)]
    batch = post(server, json.dumps([QUESTION, other]))
    assert batch.status_code == 200
    assert batch.json() == single


def test_classic_sample_form_with_version(server: ServerProcess) -> None:
    classic = {"context": CONTEXT, "question": QUESTION["question"], "version": "1.0"}
    assert post(server, json.dumps(classic)).json() == post(server, json.dumps(QUESTION)).json()


def test_json_lines_in_and_out(server: ServerProcess) -> None:
    lines = json.dumps(QUESTION) + "\n" + json.dumps(QUESTION) + "\n"
    response = post(server, lines, "application/jsonlines", Accept="application/jsonlines")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/jsonlines")
    answers = [json.loads(line) for line in response.text.splitlines()]
    assert len(answers) == 2 and answers[0] == answers[1]
    assert answers[0] == post(server, json.dumps(QUESTION)).json()


def test_custom_attributes_pass_through_on_success_and_error(server: ServerProcess) -> None:
    attrs = "trace_id=abc-123,tenant=blue"
    ok = post(server, json.dumps(QUESTION), **{"X-Amzn-SageMaker-Custom-Attributes": attrs})
    bad = post(server, "{", **{"X-Amzn-SageMaker-Custom-Attributes": attrs})
    assert ok.headers["x-amzn-sagemaker-custom-attributes"] == attrs
    assert bad.headers["x-amzn-sagemaker-custom-attributes"] == attrs


# --- bad input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('{"question": "x", "context": ', "not valid JSON"),
        ('{"question": 3, "context": "c"}', "'question' must be a string"),
        ('{"question": "q"}', "missing the field 'context'"),
        ('{"question": "q", "context": "   "}', "'context' is empty"),
        ("[]", "list is empty"),
        ('["just a string"]', "must be a JSON object"),
        ("", "empty"),
        (b"\xff\xfe", "UTF-8"),
        ('{"question": "\\ud800 why", "context": "c"}', "'question' holds an unpaired UTF-16 surrogate (\\ud800)"),
        ('{"question": "why", "context": "c \\udfff"}', "'context' holds an unpaired UTF-16 surrogate (\\udfff)"),
        ('{"question": "q", "context": "c", "version": ' + "7" * 5000 + "}", "digits, too long to read"),
    ],
)
def test_malformed_requests_are_400(server: ServerProcess, body: str | bytes, fragment: str) -> None:
    assert_error(post(server, body), 400, fragment)


@pytest.mark.parametrize(
    "head",
    [
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: twelve\r\n\r\n",
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nBad Header Name: y\r\n\r\n",
        b"POST /invocations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_a_request_http_cannot_parse_is_400_in_json_and_the_server_lives(server: ServerProcess, head: bytes) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(head)
        answer = b""
        while chunk := raw.recv(65536):  # the server closes the connection after its answer
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status_line == b"HTTP/1.1 400 Bad Request"
    assert b"content-type: application/json" in headers.lower()
    error = json.loads(body)
    assert error["status"] == 400 and error["message"].startswith("malformed HTTP request: ")
    assert post(server, json.dumps(QUESTION)).status_code == 200


def test_question_longer_than_the_largest_bucket_is_400(server: ServerProcess) -> None:
    body = json.dumps({"question": "why " * 500, "context": CONTEXT})
    assert_error(post(server, body), 400, "question is too long")


def test_unsupported_content_type_is_415(server: ServerProcess) -> None:
    assert_error(post(server, "a,b", "text/csv"), 415, "text/csv")


def test_unacceptable_accept_is_406(server: ServerProcess) -> None:
    assert_error(post(server, json.dumps(QUESTION), Accept="text/csv"), 406, "text/csv")


def test_body_over_6_mb_is_413_and_server_lives(server: ServerProcess) -> None:
    huge = json.dumps({"question": "q", "context": "a" * (6 * 1024 * 1024)})
    assert_error(post(server, huge), 413, "limit")
    assert post(server, json.dumps(QUESTION)).status_code == 200


def test_model_failure_is_500_without_traceback_and_server_lives(server: ServerProcess) -> None:
    response = post(server, json.dumps({"question": f"will it {FAIL_WORD}?", "context": CONTEXT}))
    assert_error(response, 500, "internal error")
    assert "toy model asked to fail" not in response.text
    assert post(server, json.dumps(QUESTION)).status_code == 200
    assert "toy model asked to fail" in server.log()


def test_unknown_route_is_json_404(server: ServerProcess) -> None:
    with server.client() as client:
        response = client.get("/nope")
    assert_error(response, 404, "/nope")


# --- buckets, stride, batching -----------------------------------------------------------------------------


def test_short_request_runs_in_the_smallest_bucket(server: ServerProcess) -> None:
    before = stats(server)
    post(server, json.dumps(QUESTION))
    after = stats(server)
    assert calls(after, 64) == calls(before, 64) + 1
    for bucket in (128, 256, 384):
        assert calls(after, bucket) == calls(before, bucket)


def test_medium_request_runs_in_the_bucket_that_fits(server: ServerProcess) -> None:
    context = " ".join(["forest"] * 100)  # ~100 tokens with the question: bucket 128
    before = stats(server)
    post(server, json.dumps({"question": "what?", "context": context}))
    after = stats(server)
    assert calls(after, 128) == calls(before, 128) + 1
    assert calls(after, 64) == calls(before, 64)


def test_long_context_is_split_into_strided_windows(server: ServerProcess) -> None:
    context = " ".join(f"word{i % 50}" for i in range(400))  # well over 384 tokens
    before = stats(server)
    response = post(server, json.dumps({"question": "which word?", "context": context}))
    after = stats(server)
    assert response.status_code == 200
    body = response.json()
    assert context[body["start"] : body["end"]] == body["answer"]
    windows = after["features"] - before["features"]
    assert windows >= 3  # 400 words are > 800 word pieces: several overlapping windows
    assert calls(after, 384) > calls(before, 384)


# --- readiness and refusal -------------------------------------------------------------------------------------


def test_ping_is_503_until_the_model_is_loaded(toy_model_dir: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(toy_model_dir, model_dir)
    manifest_text = (model_dir / "manifest.json").read_text()
    (model_dir / "manifest.json").unlink()
    os.mkfifo(model_dir / "manifest.json")  # the loader blocks here until the test writes the manifest
    proc = start_server(model_dir, tmp_path / "server.log")
    try:
        proc.wait_accepting()
        with proc.client() as client:
            ping = client.get("/ping")
            assert ping.status_code == 503 and ping.json()["status"] == "loading"
            assert_error(client.post("/invocations", json=QUESTION), 503, "loading")
        with (model_dir / "manifest.json").open("w") as fifo:
            fifo.write(manifest_text)
        proc.wait_ready()
        assert post(proc, json.dumps(QUESTION)).status_code == 200
    finally:
        assert proc.terminate() == 0


def _wait_failed(proc: ServerProcess) -> dict:
    deadline = time.monotonic() + 60
    with proc.client() as client:
        while time.monotonic() < deadline:
            ping = client.get("/ping")
            assert ping.status_code == 503
            if ping.json()["status"] == "failed":
                return ping.json()
            time.sleep(0.05)
    raise TimeoutError(proc.log())


def test_tampered_model_is_refused_with_a_clear_log_line(toy_model_dir: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(toy_model_dir, model_dir)
    with (model_dir / "model.pt").open("r+b") as fh:
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 0xFF]))
    proc = start_server(model_dir, tmp_path / "server.log")
    try:
        proc.wait_accepting()
        ping = _wait_failed(proc)
        # Clients learn that, not why: file names and paths stay in the log.
        assert ping["message"] == "model refused: the model directory failed verification"
        response = post(proc, json.dumps(QUESTION))
        assert_error(response, 503, "failed verification")
        assert "model.pt" not in response.text and str(tmp_path) not in response.text
        assert "model refused: model is tampered: sha256 mismatch for model.pt" in proc.log()
    finally:
        proc.terminate()


def test_incomplete_model_is_refused(toy_model_dir: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    shutil.copytree(toy_model_dir, model_dir)
    (model_dir / "tokenizer.json").unlink()
    proc = start_server(model_dir, tmp_path / "server.log")
    try:
        proc.wait_accepting()
        assert "tokenizer.json" not in _wait_failed(proc)["message"]
        refusal = [line for line in proc.log().splitlines() if "model refused:" in line]
        assert len(refusal) == 1 and "model is incomplete: tokenizer.json missing" in refusal[0]
    finally:
        proc.terminate()


def test_model_whose_warm_up_fails_never_reports_healthy(toy_model_dir: Path, tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    build_toy_model_dir(model_dir, minilm_tokenizer_path())
    # A tokenizer whose filler text contains the fail word makes every warm-up call fail.
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    vocab["warm"], vocab[FAIL_WORD] = vocab[FAIL_WORD], vocab["warm"]
    (model_dir / "tokenizer.json").write_text(json.dumps(tok))
    from container.manifest import hash_files

    manifest = json.loads((model_dir / "manifest.json").read_text())
    manifest["files"] = hash_files(model_dir)
    (model_dir / "manifest.json").write_text(json.dumps(manifest))
    proc = start_server(model_dir, tmp_path / "server.log")
    try:
        proc.wait_accepting()
        assert _wait_failed(proc)["message"] == "model failed to load; see the server log"
        [line] = [line for line in proc.log().splitlines() if "model failed to load:" in line]
        assert "toy model asked to fail" in line  # the detail, on the one line the control plane reads
    finally:
        proc.terminate()


# --- shutdown ---------------------------------------------------------------------------------------------------


def _send_half(proc: ServerProcess, body: bytes) -> socket.socket:
    """A request whose body has only half arrived: in flight until the test sends the rest (or never does)."""
    sock = socket.create_connection(("127.0.0.1", proc.port), timeout=30)
    head = (
        "POST /invocations HTTP/1.1\r\nHost: sagebox\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock.sendall(head + body[: len(body) // 2])
    deadline = time.monotonic() + 30
    while stats(proc)["in_flight"] < 1:  # the server has the request (polled, not slept on)
        assert time.monotonic() < deadline, proc.log()
    return sock


def _wait_listening_stopped(proc: ServerProcess) -> None:
    """SIGTERM's drain has begun once the server stops accepting connections."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", proc.port), timeout=2).close()
        except OSError:
            return
    raise TimeoutError(proc.log())


def test_sigterm_drains_in_flight_requests_and_exits_0(toy_model_dir: Path, tmp_path: Path) -> None:
    proc = start_server(toy_model_dir, tmp_path / "server.log")
    proc.wait_ready()  # a failure here is cleaned up by the session fixture
    body = json.dumps(QUESTION).encode()
    with _send_half(proc, body) as sock:
        proc.process.send_signal(signal.SIGTERM)
        _wait_listening_stopped(proc)
        sock.sendall(body[len(body) // 2 :])  # the rest arrives during the drain
        reply = sock.makefile("rb").read()
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert proc.terminate(timeout=30) == 0
    assert "drained after SIGTERM" in proc.log()
    assert "cut off" not in proc.log()


def test_sigterm_reports_requests_cut_off_at_the_drain_deadline(toy_model_dir: Path, tmp_path: Path) -> None:
    proc = start_server(toy_model_dir, tmp_path / "server.log", SAGEBOX_DRAIN_SECONDS="0")
    proc.wait_ready()
    with _send_half(proc, json.dumps(QUESTION).encode()):
        proc.process.send_signal(signal.SIGTERM)
        assert proc.terminate(timeout=30) == 0  # the rest of the body never comes
    log = proc.log()
    assert "SIGTERM: 1 in-flight request(s) cut off at the 0s drain deadline" in log
    assert "drained after SIGTERM" not in log


@pytest.mark.slow
def test_two_workers_serve_and_exit_0_on_sigterm(toy_model_dir: Path, tmp_path: Path) -> None:
    proc = start_server(toy_model_dir, tmp_path / "server.log", SAGEMAKER_MODEL_SERVER_WORKERS="2")
    try:
        proc.wait_ready()
        # Each worker only accepts once its model is loaded, so no request ever meets a loading worker.
        for _ in range(6):
            assert post(proc, json.dumps(QUESTION)).status_code == 200
    finally:
        exit_code = proc.terminate()
    assert exit_code == 0
    pids = {line.split("[pid ")[1].split("]")[0] for line in proc.log().splitlines() if "model ready" in line}
    assert len(pids) == 2


def test_an_inherited_listening_socket_is_served_whatever_port_the_variables_name(
    toy_model_dir: Path, tmp_path: Path
) -> None:
    """The box's launchers bind the port and the server inherits the socket (SAGEBOX_LISTEN_FD): the server serves
    on it and binds nothing itself, so a port taken by another socket cannot stop it (it would, binding its own)."""
    from sagebox.box.processes import popen
    from sagebox.local_server import inherited_listener

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with inherited_listener() as (fd, listen):
            port = int(listen["SAGEMAKER_BIND_TO_PORT"])
            env = {
                "SAGEBOX_MODEL_DIR": str(toy_model_dir),
                "SAGEBOX_INTRA_OP_THREADS": "1",
                **listen,
                "SAGEMAKER_BIND_TO_PORT": str(taken.getsockname()[1]),  # a port the server must not try to bind
            }
            process = popen(["-m", "container", "serve"], tmp_path / "server.log", env, pass_fds=(fd,))
        server = ServerProcess(process, port, tmp_path / "server.log")
        STARTED.append(server)
        try:
            server.wait_ready(60)
            assert post(server, json.dumps(QUESTION)).status_code == 200
        finally:
            assert server.terminate() == 0
    assert f"serving on port {port} " in server.log()


def test_onnx_model_serves_the_same_answer_as_in_process(tiny_onnx_model_dir: Path, tmp_path: Path) -> None:
    proc = start_server(tiny_onnx_model_dir, tmp_path / "server.log")
    try:
        proc.wait_ready()
        served = post(proc, json.dumps(QUESTION)).json()
    finally:
        proc.terminate()
    direct = Predictor.load(tiny_onnx_model_dir).answer(QUESTION["question"], QUESTION["context"])
    assert served["answer"] == direct.text
    assert (served["start"], served["end"]) == (direct.start, direct.end)
    assert served["score"] == pytest.approx(direct.score, rel=1e-5)


def _nice_by_thread(pid: int) -> dict[int, int]:
    """Each thread's nice value (field 19 of /proc/<pid>/task/<tid>/stat)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found[int(task.name)] = int((task / "stat").read_text().rsplit(")", 1)[1].split()[16])
    return found


def test_the_http_thread_yields_the_cpu_and_the_inference_thread_keeps_it(server: ServerProcess) -> None:
    assert post(server, json.dumps(QUESTION)).status_code == 200
    nice = _nice_by_thread(server.process.pid)
    started = os.getpriority(os.PRIO_PROCESS, 0)  # what the server inherited from this process
    assert nice[server.process.pid] == min(19, started + 7)  # the event loop: SAGEBOX_HTTP_NICE's default
    assert started in nice.values()  # the inference thread (and the runtime's threads it starts) as the server began
