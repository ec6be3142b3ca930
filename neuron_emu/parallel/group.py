"""The parent's side of the emulated NeuronCores: start the launcher, talk to each rank, shut everything down."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np

from neuron_emu.errors import ArtifactError

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
DEFAULT_START_TIMEOUT_S = 300.0  # the launcher imports torch (~2.5 s of CPU, far more on a loaded machine)
DEFAULT_COLLECTIVE_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0

Popen = Callable[..., subprocess.Popen[bytes]]


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    # gloo binds to the loopback interface only: the emulated links never leave this machine.
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p)
    return env


class WorkerGroup:
    """`degree` worker processes (one per rank) serving the graphs in `rank_files`."""

    def __init__(
        self,
        rank_files: Sequence[Path],
        *,
        threads: int = 1,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
        popen: Popen = subprocess.Popen,
    ) -> None:
        self.rank_files = [Path(p) for p in rank_files]
        self.degree = len(self.rank_files)
        self.threads = threads
        self.start_timeout_s = start_timeout_s
        self.collective_timeout_s = collective_timeout_s
        self.popen = popen
        self.conns: list[Connection] = []
        self.pids: list[int] = []
        self.launcher: subprocess.Popen[bytes] | None = None
        self.scratch: Path | None = None
        self.broken: str | None = None

    @property
    def running(self) -> bool:
        return self.launcher is not None and self.broken is None

    def start(self) -> None:
        if self.launcher is not None:
            return
        self.scratch = Path(tempfile.mkdtemp(prefix="neuron_emu_parallel_"))
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(self.degree)]
        child_fds = [child.fileno() for _, child in pairs]
        settings = {
            "fds": child_fds,
            "world": self.degree,
            "threads": self.threads,
            "store": str(self.scratch / "store"),
            "rank_files": [str(p) for p in self.rank_files],
            "collective_timeout_s": self.collective_timeout_s,
        }
        log = (self.scratch / "launcher.log").open("wb")
        try:
            self.launcher = self.popen(
                [sys.executable, "-m", "neuron_emu.parallel.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=child_fds,
                env=_worker_env(),
                start_new_session=True,  # Ctrl-C reaches the parent only; it closes the workers
            )
            assert self.launcher.stdin is not None
            self.launcher.stdin.write((json.dumps(settings) + "\n").encode())
            self.launcher.stdin.close()
        finally:
            log.close()
            for _, child in pairs:
                child.close()
        self.conns = [Connection(parent.detach()) for parent, _ in pairs]
        self.pids = [0] * self.degree
        replies = self._gather(self.start_timeout_s, "starting")
        for rank, reply in enumerate(replies):
            self.pids[rank] = int(reply[2])

    def _launcher_tail(self) -> str:
        if self.scratch is None:
            return ""
        try:
            lines = [line for line in (self.scratch / "launcher.log").read_text().splitlines() if line.strip()]
        except OSError:
            return ""
        return f" ({lines[-1].strip()})" if lines else ""

    def _gather(self, timeout_s: float | None, doing: str) -> list[tuple[Any, ...]]:
        """One reply per rank; any error, EOF or timeout breaks the group and raises one line."""
        replies: dict[int, tuple[Any, ...]] = {}
        pending = {id(conn): rank for rank, conn in enumerate(self.conns)}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        failure: str | None = None
        while pending and failure is None:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = wait([c for c in self.conns if id(c) in pending], timeout=remaining)
            if not ready:
                failure = f"no answer from rank(s) {sorted(pending.values())} within {timeout_s:.0f} s while {doing}"
                break
            for conn in ready:
                assert isinstance(conn, Connection)
                rank = pending.pop(id(conn))
                try:
                    reply = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    failure = f"worker rank {rank} exited while {doing}{self._launcher_tail()}"
                    break
                if reply[0] == "error":
                    failure = f"rank {reply[1]} failed while {doing}: {reply[2]}"
                    break
                replies[rank] = reply
        if failure is not None:
            self.broken = failure
            self.close(force=True)
            raise ArtifactError(f"neuron_emu.parallel: {failure}")
        return [replies[rank] for rank in range(self.degree)]

    def run(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[dict[str, float]]]:
        """Send the inputs to every rank; rank 0's outputs and every rank's timings."""
        if self.broken is not None:
            raise ArtifactError(
                f"neuron_emu.parallel: the workers stopped earlier ({self.broken}); load the model again"
            )
        if self.launcher is None:
            raise ArtifactError("neuron_emu.parallel: the workers are not running")
        payload = ("run", [np.ascontiguousarray(a) for a in arrays])
        for rank, conn in enumerate(self.conns):
            try:
                _send(conn, payload)
            except OSError:
                self.broken = f"worker rank {rank} is gone"
                self.close(force=True)
                raise ArtifactError(f"neuron_emu.parallel: {self.broken}{self._launcher_tail()}") from None
        replies = self._gather(None, "running a request")
        return list(replies[0][2]), [dict(reply[3]) for reply in replies]

    def close(self, force: bool = False) -> None:
        """Stop the workers and the launcher and remove scratch files.

        Normally the ranks are asked to stop and the launcher exits after them; with `force` (a rank failed, so
        others may be blocked in a collective) the launcher is killed at once, and Linux kills its workers with it
        (their parent-death signal); their sockets reaching EOF ends them too where that signal is unavailable.
        """
        if not force:
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    _send(conn, ("stop",))
        for conn in self.conns:
            conn.close()
        self.conns = []
        launcher = self.launcher
        if launcher is not None:
            try:
                launcher.wait(timeout=0 if force else STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
        self.launcher = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
