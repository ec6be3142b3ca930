"""Which Docker-API engine to talk to: the user's Docker Engine when one answers, else the project's podman."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sagebox.errors import SageboxError

if TYPE_CHECKING:
    import docker

DOCKER_SOCKET = Path("/var/run/docker.sock")
# Builds stream for minutes with quiet stretches (pip installing torch): read timeout per chunk.
CLIENT_TIMEOUT_S = 900


@dataclass(frozen=True)
class Engine:
    kind: Literal["docker", "podman"]
    base_url: str
    why: str


def choose_engine(env: Mapping[str, str], docker_socket_answers: Callable[[], bool], podman_socket: Path) -> Engine:
    """DOCKER_HOST wins; then a Docker Engine answering on its default socket; else the project's podman."""
    host = env.get("DOCKER_HOST", "").strip()
    if host:
        return Engine("docker", host, "DOCKER_HOST is set")
    if docker_socket_answers():
        return Engine("docker", f"unix://{DOCKER_SOCKET}", f"a Docker Engine answers on {DOCKER_SOCKET}")
    return Engine("podman", f"unix://{podman_socket}", "no Docker Engine: using podman's Docker-compatible API")


def connect(base_url: str, timeout_s: float = CLIENT_TIMEOUT_S) -> docker.DockerClient:
    import docker
    import docker.errors

    try:
        return docker.DockerClient(base_url=base_url, version="auto", timeout=int(timeout_s))
    except docker.errors.DockerException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SageboxError(f"no Docker API answers at {base_url} ({first}); run `sagebox containers setup`") from None


def answers(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when a Docker API answers `/_ping` at base_url."""
    import docker
    import docker.errors
    import requests

    if base_url.startswith("unix://") and not Path(base_url.removeprefix("unix://")).exists():
        return False
    try:
        client = docker.APIClient(base_url=base_url, version="1.41", timeout=int(max(1, timeout_s)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError):
        return False
