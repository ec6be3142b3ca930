"""The processes that stand in for NeuronCores: one fork server per parent, one worker per rank (`python -m`).

The fork server imports torch once and waits on a control socket (SOCK_SEQPACKET, inherited from the parent):
each message is one JSON line of settings with one socket per rank attached (SCM_RIGHTS), and the server forks
one worker per rank on them (forking a warm interpreter rather than spawning N: each torch import costs ~2.5 s
of CPU here). Each worker loads its rank's graphs, joins a gloo process group over the loopback interface and
serves requests sent on its own socket by the parent: it runs the segments, all-reducing the partial sums between
them (the last segment also gets the request's inputs, unless the settings say `head_inputs` false: a format-1
model), and rank 0 replies with the outputs. Workers exit when the parent asks, when their socket reaches EOF (the
parent died) or when the server dies (Linux parent-death signal); the server exits when its control socket
reaches EOF (the parent closed it, or died).
Settings with `kind` "decoder" make the workers serve a neuron_emu.llm decoder instead: each loads its rank's
weights from the decoder's directory, holds its KV cache and runs steps (neuron_emu.llm.rank), the same way.
Stand-in: NeuronCores and NeuronLink collectives are emulated by CPU processes and gloo all-reduces over loopback.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pickle
import signal
import socket
import sys
import time
from datetime import timedelta
from multiprocessing.connection import Connection
from typing import Any

PR_SET_PDEATHSIG = 1
MAX_MESSAGE = 1 << 20
MAX_RANKS = 256


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    neuron = [line for line in lines if line.startswith("neuron_emu")]
    text = (neuron or lines or [type(exc).__name__])[-1]
    return f"{type(exc).__name__}: {text}"


def _die_with_server() -> None:
    """Ask Linux to kill this worker when its parent (the fork server, single-threaded) dies."""
    if sys.platform.startswith("linux"):
        # Without prctl the socket's EOF still ends the worker once the parent is gone.
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _send(conn: Connection, message: tuple[Any, ...]) -> None:
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def become(uid: int, gid: int) -> None:
    """Take the identity uid/gid (groups first: once the uid changes the process may no longer change them).

    A server that starts as root (SageMaker runs containers as root) loads the model, then serves as an
    unprivileged user; the processes standing in for its NeuronCores follow it, so no model code keeps running as
    root. Asking for the identity a process already has is a no-op that succeeds.
    """
    if os.geteuid() == uid and os.getegid() == gid and os.getuid() == uid:
        return
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _load_segments(path: str) -> list[Any]:
    from neuron_emu.runtime import load

    shard = load(path)
    return [getattr(shard, f"segment{i}") for i in range(int(shard.count))]


def serve(rank: int, conn: Connection, settings: dict[str, Any]) -> int:
    """One worker: load rank `rank`'s graphs, then answer ("run", inputs) until ("stop",) or EOF."""
    import torch
    import torch.distributed as dist

    world = int(settings["world"])
    try:
        torch.set_num_threads(int(settings["threads"]))
        if world > 1:
            dist.init_process_group(
                "gloo",
                init_method=f"file://{settings['store']}",
                rank=rank,
                world_size=world,
                timeout=timedelta(seconds=float(settings["collective_timeout_s"])),
            )
        if settings.get("kind") == "decoder":
            from neuron_emu.llm.rank import DecoderRank

            decoder = DecoderRank(settings["directory"], rank, world)
        else:
            segments = _load_segments(settings["rank_files"][rank])
        _send(conn, ("ready", rank, os.getpid()))
    except Exception as exc:
        _send(conn, ("error", rank, one_line(exc)))
        return 1
    try:
        while True:
            try:
                message = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):
                return 0  # the parent is gone
            if message[0] == "stop":
                return 0
            if message[0] == "become":
                try:
                    become(int(message[1]), int(message[2]))
                    _send(conn, ("ok", rank, os.getuid(), os.getgid()))
                except (OSError, ValueError) as exc:
                    _send(conn, ("error", rank, one_line(exc)))
                continue
            try:
                if settings.get("kind") == "decoder":
                    _send(conn, _run_decoder(rank, decoder, message[1]))
                else:
                    _send(conn, _run(rank, world, segments, message[1], bool(settings.get("head_inputs", True))))
            except (BrokenPipeError, ConnectionResetError):
                return 0
    finally:
        if world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def _run(rank: int, world: int, segments: list[Any], arrays: list[Any], head_inputs: bool = True) -> tuple[Any, ...]:
    """Run one request: segment 0 on the inputs, then each segment on the previous one's hidden state and mask bias
    and its all-reduced partial sum; the last segment also takes the inputs when `head_inputs` (the head may use
    them). Rank 0 replies with the last segment's outputs."""
    import torch
    import torch.distributed as dist

    try:
        start = time.perf_counter()
        collective_s = 0.0
        with torch.no_grad():
            inputs = [torch.from_numpy(a) for a in arrays]
            state = segments[0](*inputs)
            last = len(segments) - 1
            for index in range(1, last + 1):
                hidden, bias, partial = state
                if world > 1:
                    began = time.perf_counter()
                    dist.all_reduce(partial)
                    collective_s += time.perf_counter() - began
                extra = inputs if head_inputs and index == last else []
                state = segments[index](hidden, bias, partial, *extra)
        elapsed = time.perf_counter() - start
        outputs = [t.contiguous().numpy() for t in state] if rank == 0 else None
        return ("ok", rank, outputs, {"run_us": elapsed * 1e6, "collective_us": collective_s * 1e6})
    except Exception as exc:
        return ("error", rank, one_line(exc))


def _run_decoder(rank: int, decoder: Any, payload: Any) -> tuple[Any, ...]:
    """One decoder step on this rank (neuron_emu.llm.rank.DecoderRank.step); rank 0 replies with the logits."""
    try:
        start = time.perf_counter()
        outputs = decoder.step(payload)
        return ("ok", rank, outputs, {"run_us": (time.perf_counter() - start) * 1e6})
    except Exception as exc:
        return ("error", rank, one_line(exc))


def _fork_worker(rank: int, fd: int, siblings: list[int], control: socket.socket, settings: dict[str, Any]) -> int:
    """Fork one worker on `fd`; returns its pid (in the server)."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_server()
        control.close()
        for other in siblings:
            if other != fd:
                os.close(other)
        code = serve(rank, Connection(fd), settings)
    finally:
        os._exit(code)


def fork_server(control: socket.socket) -> int:
    """Fork a worker group for every settings message on `control`, until it reaches EOF."""
    # Imported once here, before forking, so every worker starts with them loaded.
    import torch.distributed  # noqa: F401

    import neuron_emu.runtime  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps exited workers: no zombies
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, MAX_RANKS)
        except (ConnectionResetError, OSError):
            return 0
        if not data:
            for fd in fds:
                os.close(fd)
            return 0  # the parent closed the control socket or died
        settings = json.loads(data)
        if "become" in settings:  # the parent dropped root: so does this server (its future workers with it)
            uid, gid = settings["become"]
            try:
                become(int(uid), int(gid))
            except (OSError, ValueError) as exc:
                control.send(one_line(exc).encode())
                return 1  # a server that must not keep its identity stops
            control.send(b"ok")
            continue
        for rank, fd in enumerate(fds):
            _fork_worker(rank, fd, fds, control, settings)
        for fd in fds:
            os.close(fd)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent, which closes the workers
    control = socket.socket(fileno=int(sys.argv[1]))
    code = fork_server(control)
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch is loaded)


if __name__ == "__main__":
    sys.exit(main())
