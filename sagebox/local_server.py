"""Run the serving container's server as a local process: what `sagebox up` and the benchmarks start."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from sagebox.errors import SageboxError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def inherited_listener(port: int = 0, host: str = "127.0.0.1") -> Iterator[tuple[int, dict[str, str]]]:
    """A listening socket for a serving process to inherit: (its file descriptor, the server's variables naming it).
    Start the process inside the block with `pass_fds=(fd,)`; the block closes this process's copy.

    The port is bound here, not chosen here and bound by the server seconds later (after its imports): in between,
    anyone's bind or outgoing connection could take it, and the server would fail to start or, worse, whoever waits
    for its /ping would reach another server. Connections made before the server accepts wait in the backlog."""
    from container import env

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
        bound = int(listener.getsockname()[1])
        yield (
            listener.fileno(),
            {
                env.BIND_TO_PORT: str(bound),
                env.BIND_HOST: host,
                env.LISTEN_FD: str(listener.fileno()),
            },
        )


@dataclass
class LocalServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def spawn(
        cls, model_dir: Path, log_path: Path, port: int | None = None, env: Mapping[str, str] | None = None
    ) -> Self:
        """Start `python -m container serve` for `model_dir`; returns at once (see wait_ready)."""
        from sagebox.box.processes import popen

        with inherited_listener(port or 0) as (fd, listen):  # on 127.0.0.1: this machine only
            full_env = {"SAGEBOX_MODEL_DIR": str(model_dir), **listen, **(env or {})}
            process = popen(["-m", "container", "serve"], log_path, full_env, pass_fds=(fd,))
        return cls(process, int(listen["SAGEMAKER_BIND_TO_PORT"]), log_path)

    @classmethod
    @contextmanager
    def start(
        cls, model_dir: Path, log_path: Path, env: Mapping[str, str] | None = None, timeout: float = 300
    ) -> Iterator[Self]:
        server = cls.spawn(model_dir, log_path, env=env)
        try:
            server.wait_ready(timeout)
            yield server
        finally:
            server.stop()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def ping(self) -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SageboxError(
                    f"server for port {self.port} exited with {self.process.returncode}; see {self.log_path}"
                )
            try:
                status, body = self.ping()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
                continue
            if status == 200:
                return
            if body.get("status") == "failed":
                from container.logs import load_failure

                lines = self.log().splitlines()[-40:]
                reason = load_failure(lines) or str(body.get("message"))
                raise SageboxError(f"server on port {self.port} did not load its model: {reason}")
            time.sleep(0.05)
        raise SageboxError(f"server on port {self.port} not ready after {timeout:.0f}s; see {self.log_path}")

    def stats(self) -> dict[str, object]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=5) as response:
            return dict(json.loads(response.read()))

    def stop(self, timeout: float = 35) -> int:
        """SIGTERM (the server drains in-flight requests), then SIGKILL after `timeout` seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
