"""Run the serving image as SageMaker does (`serve`, model at /opt/ml/model, port 8080) and check it end to end."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sagebox.errors import SageboxError
from sagebox.local_server import free_port

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

CONTAINER_PORT = 8080
MODEL_MOUNT = "/opt/ml/model"
# SageMaker's shutdown: SIGTERM, then SIGKILL this many seconds later.
STOP_GRACE_S = 30.0
# SageMaker's default container startup health check timeout.
STARTUP_TIMEOUT_S = 240.0
SAMPLE_QUESTION = {
    "question": "Where do the containers run?",
    "context": "Sagebox serves its models on SageMaker endpoints, and on podman when no Docker Engine is present.",
}


@dataclass(frozen=True)
class ContainerHandle:
    container: Container
    host_port: int
    started_at: float  # clock() just before the container started

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.host_port}"

    @property
    def id(self) -> str:
        return str(self.container.id)

    def logs(self, tail: int = 40) -> str:
        try:
            raw = self.container.logs(tail=tail)
        except Exception as exc:  # the engine may already have removed it
            return f"(no logs: {exc})"
        return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


@dataclass(frozen=True)
class CheckReport:
    seconds_to_first_answer: float
    seconds_to_ping: float
    answer: dict[str, Any]
    seconds_to_exit: float
    exit_code: int


def run_container(
    client: docker.DockerClient,
    image: str,
    model_dir: Path,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ContainerHandle:
    """`docker run IMAGE serve` with the model mounted read-only at /opt/ml/model, 8080 published on localhost.

    As on SageMaker the container runs as root, so a root-owned model directory (0700/0600) loads; the server
    drops to its service user once the model is loaded."""
    if not (model_dir / "manifest.json").exists():
        raise SageboxError(f"{model_dir} holds no manifest.json: not a Sagebox model directory")
    import docker.errors

    host_port = port or free_port()
    started = clock()
    try:
        container = client.containers.run(
            image,
            command=["serve"],
            detach=True,
            environment=dict(env or {}),
            ports={f"{CONTAINER_PORT}/tcp": ("127.0.0.1", host_port)},
            volumes={str(model_dir.resolve()): {"bind": MODEL_MOUNT, "mode": "ro"}},
            labels={"org.sagebox.role": "serving"},
        )
    except docker.errors.APIError as exc:
        raise SageboxError(f"cannot start {image}: {' '.join(str(exc.explanation or exc).split())}") from None
    return ContainerHandle(container=container, host_port=host_port, started_at=started)


def http(method: str, url: str, body: bytes | None = None, timeout_s: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


Http = Callable[..., tuple[int, bytes]]


def container_status(handle: ContainerHandle) -> str:
    handle.container.reload()
    return str(handle.container.status)


@dataclass(frozen=True)
class PingTimes:
    first_answer_s: float  # container start -> the first HTTP answer to /ping, whatever its status
    healthy_s: float  # container start -> the first 200


def wait_ping(
    handle: ContainerHandle,
    timeout_s: float = STARTUP_TIMEOUT_S,
    request: Http = http,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PingTimes:
    """Poll GET /ping until it answers 200; fail fast if the container exits first."""
    deadline = handle.started_at + timeout_s
    last = "no answer yet"
    first_answer: float | None = None
    while clock() < deadline:
        try:
            status, body = request("GET", f"{handle.url}/ping", timeout_s=2.0)
            now = clock() - handle.started_at
            first_answer = now if first_answer is None else first_answer
            if status == 200:
                return PingTimes(first_answer, now)
            last = f"/ping answered {status}: {body[:200].decode(errors='replace')}"
        except (OSError, urllib.error.URLError) as exc:
            last = f"/ping: {exc}"
        if container_status(handle) in ("exited", "dead"):
            raise SageboxError(f"the container exited before /ping answered 200: {_last_log_line(handle)}")
        sleep(0.05)
    raise SageboxError(f"/ping did not answer 200 within {timeout_s:.0f}s ({last}): {_last_log_line(handle)}")


def invoke(handle: ContainerHandle, question: Mapping[str, str], request: Http = http) -> dict[str, Any]:
    """POST one question to /invocations; the parsed answer, checked for the fields a QA answer carries."""
    status, body = request("POST", f"{handle.url}/invocations", json.dumps(question).encode(), timeout_s=60.0)
    if status != 200:
        raise SageboxError(f"/invocations answered {status}: {body[:300].decode(errors='replace')}")
    return check_answer(body, question["context"])


def check_answer(body: bytes, context_text: str) -> dict[str, Any]:
    try:
        answer = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise SageboxError(f"/invocations answered something that is not JSON: {body[:200]!r}") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("answer"), str):
        raise SageboxError(f"/invocations answered without an 'answer' string: {body[:200]!r}")
    start, end = answer.get("start"), answer.get("end")
    if isinstance(start, int) and isinstance(end, int) and context_text[start:end] != answer["answer"]:
        raise SageboxError(f"the answer {answer['answer']!r} is not the context's characters {start}..{end}")
    return answer


def stop(
    handle: ContainerHandle, grace_s: float = STOP_GRACE_S, clock: Callable[[], float] = time.monotonic
) -> tuple[float, int]:
    """SIGTERM, then SIGKILL after `grace_s` as SageMaker does; (seconds until exit, exit code)."""
    import requests

    started = clock()
    handle.container.kill(signal="SIGTERM")
    try:
        result = handle.container.wait(timeout=grace_s)
    except requests.exceptions.RequestException:
        handle.container.kill(signal="SIGKILL")
        result = handle.container.wait(timeout=grace_s)
        code = int(result.get("StatusCode", -1))
        raise SageboxError(f"the container ignored SIGTERM for {grace_s:.0f}s and was killed (exit {code})") from None
    return clock() - started, int(result.get("StatusCode", -1))


def remove(handle: ContainerHandle) -> None:
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        handle.container.remove(force=True)


def check(
    handle: ContainerHandle,
    question: Mapping[str, str] = SAMPLE_QUESTION,
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
    request: Http = http,
    clock: Callable[[], float] = time.monotonic,
) -> CheckReport:
    """/ping 200, one /invocations answer, then SIGTERM: exit 0 within SageMaker's 30 s grace."""
    ping = wait_ping(handle, startup_timeout_s, request, clock)
    answer = invoke(handle, question, request)
    seconds_to_exit, exit_code = stop(handle, STOP_GRACE_S, clock)
    if exit_code != 0:
        raise SageboxError(f"the container exited {exit_code} after SIGTERM, not 0: {_last_log_line(handle)}")
    return CheckReport(ping.first_answer_s, ping.healthy_s, answer, seconds_to_exit, exit_code)


def _last_log_line(handle: ContainerHandle) -> str:
    lines = [line for line in handle.logs().splitlines() if line.strip()]
    return lines[-1] if lines else "the container logged nothing"
