"""Background processes that outlive the CLI call that started them (moto, the gateway, serving processes)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from sagebox.errors import SageboxError
from sagebox.paths import REPO


def spawn(
    args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = ()
) -> int:
    """Start `python <args>` detached (own session), logging to `log_path`; returns its pid."""
    return popen(args, log_path, env, pass_fds).pid


def popen(
    args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = ()
) -> subprocess.Popen[bytes]:
    """`python <args>` from the repository, in its own session (signals reach its whole group), output appended
    to `log_path`, the repository on PYTHONPATH; `pass_fds` are inherited (a listening socket)."""
    return popen_program([sys.executable, *args], log_path, env, pass_fds)


def popen_program(
    argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None, pass_fds: Sequence[int] = ()
) -> subprocess.Popen[bytes]:
    """Any program, started like `popen` (own session, output appended to `log_path`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])),
        **(env or {}),
    }
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            cwd=REPO,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )


def alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop(pid: int, timeout: float = 35.0) -> bool:
    """SIGTERM the process group, SIGKILL after `timeout`; True if it was running."""
    if not alive(pid):
        return False
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    return True


def wait_http(url: str, pid: int, log_path: Path, timeout: float = 60.0, ok: tuple[int, ...] = (200,)) -> None:
    """Wait until GET `url` answers with a status in `ok`; fail early if the process died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] if log_path.exists() else []
            raise SageboxError(f"process {pid} exited while starting ({url}); last log line: {' '.join(tail)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status in ok:
                    return
        except urllib.error.HTTPError as err:
            if err.code in ok:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise SageboxError(f"{url} did not answer within {timeout:.0f}s; see {log_path}")
