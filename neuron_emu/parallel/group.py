"""The parent's side of the emulated NeuronCores: the shared fork server, and one worker group per model."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import numpy as np

from neuron_emu.errors import ArtifactError

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
DEFAULT_START_TIMEOUT_S = 300.0  # the fork server imports torch (~2.5 s of CPU, far more on a loaded machine)
DEFAULT_COLLECTIVE_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0
PEER_EXIT_GRACE_S = 1.0
MAX_REPLY = 4096  # the fork server's one-line answers on its control socket

Popen = Callable[..., subprocess.Popen[bytes]]


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    # gloo binds to the loopback interface only: the emulated links never leave this machine.
    env["GLOO_SOCKET_IFNAME"] = "lo"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p)
    return env


class ForkServer:
    """One `python -m neuron_emu.parallel.worker` process that forks worker groups on request.

    Shared by the worker groups of one parent process while any of them is open (`acquire` / `release`): the
    first group pays for its torch import, later ones fork in milliseconds. It exits when the last group
    releases it, or when this process dies (its control socket reaches EOF), and its workers die with it.
    """

    _lock = threading.Lock()
    _shared: ForkServer | None = None

    def __init__(self, popen: Popen = subprocess.Popen) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="neuron_emu_parallel_"))
        control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = (self.scratch / "server.log").open("wb")
        try:
            self.process = popen(
                [sys.executable, "-m", "neuron_emu.parallel.worker", str(child.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                pass_fds=[child.fileno()],
                env=_worker_env(),
                start_new_session=True,  # Ctrl-C reaches the parent only; it closes the workers
            )
        finally:
            log.close()
            child.close()
        self.control = control
        self.users = 0

    @classmethod
    def acquire(cls, popen: Popen = subprocess.Popen) -> ForkServer:
        with cls._lock:
            server = cls._shared
            if server is None or server.process.poll() is not None:
                if server is not None:
                    server.stop()
                server = cls._shared = ForkServer(popen)
            server.users += 1
            return server

    def release(self) -> None:
        with self._lock:
            self.users -= 1
            if self.users <= 0:
                if ForkServer._shared is self:
                    ForkServer._shared = None
                self.stop()

    def fork(self, settings: dict[str, Any], fds: Sequence[int]) -> None:
        try:
            socket.send_fds(self.control, [json.dumps(settings).encode()], list(fds))
        except OSError as exc:
            raise ArtifactError(f"neuron_emu.parallel: the fork server is gone ({exc}){self.log_tail()}") from None

    def become(self, uid: int, gid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """The server takes uid/gid and says so (a server that cannot says why and exits). It is no longer shared:
        groups started later get a new server as whoever starts them; groups already running keep their workers."""
        with self._lock:
            if ForkServer._shared is self:
                ForkServer._shared = None
        self.fork({"become": [uid, gid]}, [])
        try:
            self.control.settimeout(timeout_s)
            reply = self.control.recv(MAX_REPLY).decode(errors="replace")
        except OSError as exc:  # a timeout included
            reply = f"no answer ({exc})"
        finally:
            self.control.settimeout(None)
        if reply != "ok":
            raise ArtifactError(f"neuron_emu.parallel: the fork server could not become uid {uid}: {reply or 'gone'}")

    def log_tail(self) -> str:
        try:
            lines = [line for line in (self.scratch / "server.log").read_text().splitlines() if line.strip()]
        except OSError:
            return ""
        return f" ({lines[-1].strip()})" if lines else ""

    def stop(self) -> None:
        self.control.close()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Pid:
    """A worker process we started, held by a pidfd where Linux has them (immune to pid reuse)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.fd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(pid)

    def exited(self) -> bool:
        if self.fd is not None:
            return bool(select.select([self.fd], [], [], 0)[0])
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        return False

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class WorkerGroup:
    """`degree` worker processes (one per rank) serving the graphs in `rank_files`; `head_inputs`: whether their
    last segment takes the request's inputs too (false for models saved in neuron_emu.parallel format 1). `kind`
    "decoder" makes them serve a neuron_emu.llm decoder instead (its directory in `extra`, see
    neuron_emu.parallel.worker): the same processes, collectives and lifecycle, another request."""

    def __init__(
        self,
        rank_files: Sequence[Path],
        *,
        head_inputs: bool = True,
        threads: int = 1,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
        popen: Popen = subprocess.Popen,
        kind: str = "encoder",
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.rank_files = [Path(p) for p in rank_files]
        self.kind = kind
        self.extra = dict(extra or {})
        self.degree = len(self.rank_files)
        self.head_inputs = head_inputs
        self.threads = threads
        self.start_timeout_s = start_timeout_s
        self.collective_timeout_s = collective_timeout_s
        self.popen = popen
        self.conns: list[Connection] = []
        self.workers: dict[int, _Pid] = {}
        self.server: ForkServer | None = None
        self.store: Path | None = None
        self.broken: str | None = None

    @property
    def running(self) -> bool:
        return self.server is not None and self.broken is None

    @property
    def pids(self) -> list[int]:
        """Worker pids in rank order (once started)."""
        return [self.workers[rank].pid for rank in sorted(self.workers)]

    def start(self) -> None:
        if self.server is not None:
            return
        self.server = ForkServer.acquire(self.popen)
        self.store = Path(tempfile.mkdtemp(prefix="neuron_emu_store_"))
        pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(self.degree)]
        settings = {
            "world": self.degree,
            "threads": self.threads,
            "store": str(self.store / "store"),
            "rank_files": [str(p) for p in self.rank_files],
            "head_inputs": self.head_inputs,
            "collective_timeout_s": self.collective_timeout_s,
            "kind": self.kind,
            **self.extra,
        }
        try:
            self.server.fork(settings, [child.fileno() for _, child in pairs])
        finally:
            for _, child in pairs:
                child.close()
        self.conns = [Connection(parent.detach()) for parent, _ in pairs]
        self._gather(self.start_timeout_s, "starting")

    def _tail(self) -> str:
        return self.server.log_tail() if self.server is not None else ""

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
                    failure = f"worker rank {rank} exited while {doing}{self._tail()}"
                    break
                if reply[0] == "error":
                    failure = f"rank {reply[1]} failed while {doing}: {reply[2]}"
                    break
                if reply[0] == "ready":  # held at once, so a failing start can still stop it
                    self.workers[rank] = _Pid(int(reply[2]))
                replies[rank] = reply
        if failure is not None:
            # A rank that died makes its peers fail in their collectives: name the dead one, not the symptom. Its
            # sockets close before its exit is visible, so give the exit a moment to show.
            pidfds = [w.fd for w in self.workers.values() if w.fd is not None]
            if pidfds and not any(w.exited() for w in self.workers.values()):
                select.select(pidfds, [], [], PEER_EXIT_GRACE_S)
            dead = [rank for rank, worker in sorted(self.workers.items()) if worker.exited()]
            if dead and f"worker rank {dead[0]} exited" not in failure:
                failure = f"worker rank {dead[0]} exited while {doing}{self._tail()}"
            self.broken = failure
            self.close(force=True)
            raise ArtifactError(f"neuron_emu.parallel: {failure}")
        return [replies[rank] for rank in range(self.degree)]

    def run(self, arrays: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[dict[str, float]]]:
        """Send the inputs to every rank; rank 0's outputs and every rank's timings."""
        outputs, timings = self.request([np.ascontiguousarray(a) for a in arrays])
        return list(outputs), timings

    def request(self, payload: Any, timeout_s: float | None = None) -> tuple[Any, list[dict[str, float]]]:
        """Send `payload` (what this kind of worker runs) to every rank; rank 0's answer and every rank's timings.
        No answer within `timeout_s` (None: wait) breaks the group, as a dead rank does."""
        if self.broken is not None:
            raise ArtifactError(
                f"neuron_emu.parallel: the workers stopped earlier ({self.broken}); load the model again"
            )
        if self.server is None:
            raise ArtifactError("neuron_emu.parallel: the workers are not running")
        message = ("run", payload)
        for rank, conn in enumerate(self.conns):
            try:
                _send(conn, message)
            except OSError:
                self.broken = f"worker rank {rank} exited before it could take a request"
                self.close(force=True)
                raise ArtifactError(f"neuron_emu.parallel: {self.broken}{self._tail()}") from None
        replies = self._gather(timeout_s, "running a request")
        return replies[0][2], [dict(reply[3]) for reply in replies]

    def become(self, uid: int, gid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Every worker of this group, and the fork server, take uid/gid (e.g. after a root parent loaded the
        model and dropped to a service user); raises ArtifactError if any rank cannot."""
        if self.server is None or self.broken is not None:
            raise ArtifactError("neuron_emu.parallel: the workers are not running")
        for conn in self.conns:
            _send(conn, ("become", uid, gid))
        self._gather(timeout_s, f"becoming uid {uid}")
        self.server.become(uid, gid)

    def _wait_exited(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        left = [w for w in self.workers.values() if not w.exited()]
        while left and time.monotonic() < deadline:
            fds = [w.fd for w in left if w.fd is not None]
            if fds:
                select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
            else:
                time.sleep(0.01)
            left = [w for w in left if not w.exited()]
        for worker in left:
            worker.kill()

    def close(self, force: bool = False) -> None:
        """Stop this group's workers (asking, waiting up to STOP_TIMEOUT_S, then killing; with `force`, a rank
        failed and others may be blocked in a collective, so killing at once) and release the fork server."""
        if not force:
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    _send(conn, ("stop",))
        for conn in self.conns:
            conn.close()
        self.conns = []
        self._wait_exited(0.0 if force else STOP_TIMEOUT_S)
        if force:
            self._wait_exited(STOP_TIMEOUT_S)  # SIGKILLed: wait until the kernel has them gone
        for worker in self.workers.values():
            worker.close()
        server, self.server = self.server, None
        if server is not None:
            server.release()
        if self.store is not None:
            shutil.rmtree(self.store, ignore_errors=True)
            self.store = None
