"""The real serving process for tests: sagebox.local_server.LocalServer plus test conveniences."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from sagebox.local_server import LocalServer

# Every server a test starts; the session fixture in tests/conftest.py stops any a failing test left behind.
STARTED: list[LocalServer] = []


class ServerProcess(LocalServer):
    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def wait_accepting(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise TimeoutError(f"server did not accept connections within {timeout}s:\n{self.log()}")

    def terminate(self, timeout: float = 35.0) -> int:
        return self.stop(timeout)


def start_server(model_dir: Path, log_path: Path, **env: str) -> ServerProcess:
    server = ServerProcess.spawn(model_dir, log_path, env={"SAGEBOX_INTRA_OP_THREADS": "1", **env})
    assert isinstance(server, ServerProcess)
    STARTED.append(server)
    return server
