"""Endpoints as real containers (`sagebox up --containers`): the serving image run through the Docker API."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError


def _client() -> Any:
    from sagebox.images import engine
    from sagebox.images.dirs import Paths
    from sagebox.images.setup import setup

    ready = setup(Paths.from_env(), log=lambda _: None)
    return engine.connect(ready.engine.base_url)


def ensure_image(say: Callable[[str], None]) -> str:
    """Build (or find up to date) the serving image; its tag, which the endpoint stacks then name."""
    from sagebox.images.serving_image import ensure_serving_image

    client, built = ensure_serving_image(say)
    client.close()
    return str(built.tag)


def start_container(model_dir: Path, port: int, environment: Mapping[str, str], image: str | None = None) -> str:
    """`docker run IMAGE serve` with the model at /opt/ml/model and 8080 published on `port`; the container id."""
    import container
    from sagebox.images.builder import image_tag
    from sagebox.images.run import run_container

    client = _client()
    try:
        handle = run_container(client, image or image_tag(container.__version__), model_dir, port, environment)
        return handle.id
    finally:
        client.close()


def wait_container(container_id: str, url: str, timeout: float) -> None:
    import time

    from sagebox.images.run import http

    client = _client()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = client.containers.get(container_id)
            if found.status in ("exited", "dead"):
                tail = found.logs(tail=3).decode(errors="replace").strip()
                raise SageboxError(f"container {container_id[:12]} exited while starting: {tail}")
            try:
                status, _ = http("GET", f"{url}/ping", timeout_s=2.0)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SageboxError(f"container {container_id[:12]} did not answer /ping 200 within {timeout:.0f}s")
    finally:
        client.close()


def stop_container(container_id: str) -> bool:
    """SIGTERM then remove (SageMaker's shutdown); False if it no longer exists."""
    import docker.errors

    client = _client()
    try:
        found = client.containers.get(container_id)
        found.stop(timeout=30)
        found.remove(force=True)
        return True
    except docker.errors.NotFound:
        return False
    finally:
        client.close()
