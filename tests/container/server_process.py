"""Start the real serving process (`python -m container serve`) on a free port for a test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

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

    def wait_ready(self, timeout: float = 60.0) -> None:
        self.wait_accepting(timeout)
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while time.monotonic() < deadline:
                if client.get("/ping").status_code == 200:
                    return
                if self.process.poll() is not None:
                    break
                time.sleep(0.05)
        raise TimeoutError(f"server not ready within {timeout}s:\n{self.log()}")

    def terminate(self, timeout: float = 35.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise


def start_server(model_dir: Path, log_path: Path, **env: str) -> ServerProcess:
    port = free_port()
    full_env = {
        **os.environ,
        "SAGEBOX_MODEL_DIR": str(model_dir),
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEBOX_INTRA_OP_THREADS": "1",
        **env,
    }
    log_file = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "container", "serve"],
        cwd=REPO,
        env=full_env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    log_file.close()
    return ServerProcess(process, port, log_path)
