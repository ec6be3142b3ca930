"""Scenario 4, the embedded AWS killed: `sagebox up` (one target, the model packaged), then SIGKILL of its embedded
AWS: `sagebox status` must say so, and `sagebox up` again must bring the endpoint back to InService; both `up`s are
timed, and the box's listening sockets (every process of the box) are recorded: all must be on loopback.

`sagebox` runs as a user runs it, a command in a process of its own (the runner is passed in, so tests can stand
in for it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.faults.box import BoxUrls, Invoker, box_client
from sagebox.bench.faults.outcomes import ANSWER
from sagebox.bench.faults.procfs import Listener, listening_sockets, session_members
from sagebox.bench.faults.waits import poll

CliRunner = Callable[[Sequence[str], Path], "subprocess.CompletedProcess[str]"]


def sagebox_cli(args: Sequence[str], state_dir: Path) -> subprocess.CompletedProcess[str]:
    """The `sagebox` command as a user runs it, on the box kept in `state_dir`."""
    from sagebox.paths import REPO, STATE_ENV

    env = {**os.environ, STATE_ENV: str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "sagebox", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )


def one_line(text: str) -> str:
    """Output with its wrapping undone (rich wraps long lines to the console width)."""
    return " ".join(text.split())


@dataclass
class RestartRun:
    """The two `up`s, what `status` said in between, and the processes and sockets of the box before and after."""

    up_s: float
    up_again_s: float
    status_after_kill: subprocess.CompletedProcess[str]
    endpoint_status_after: str
    answered_after: bool
    listeners: list[Listener]  # of the first box
    listeners_after: list[Listener]  # of the recovered box
    roles: dict[str, list[int]]  # the first box's processes: embedded AWS, gateway, serving
    roles_after: dict[str, list[int]]  # the recovered box's

    @property
    def status_says_not_running(self) -> bool:
        return "is not running" in one_line(self.status_after_kill.stdout)

    def summary(self) -> dict[str, Any]:
        """The restart scenario's figures in the results JSON."""
        return {
            "up_s": self.up_s,
            "up_again_s": self.up_again_s,
            "status_exit_code": self.status_after_kill.returncode,
            "status_says_not_running": self.status_says_not_running,
            "endpoint_status_after_up": self.endpoint_status_after,
            "answered_after_up": self.answered_after,
            "box_processes": self.roles,
            "listening": [f"{item.host}:{item.port} (pid {item.pid})" for item in self.listeners],
            "listening_after_up": [f"{item.host}:{item.port} (pid {item.pid})" for item in self.listeners_after],
            "all_on_loopback": all(item.loopback for item in [*self.listeners, *self.listeners_after]),
        }


def box_roles(state_dir: Path) -> dict[str, list[int]]:
    """The pids of the box in `state_dir` by role: embedded AWS, gateway, AWS proxy, registry (containers mode),
    serving."""
    from sagebox.box.reconciler import load_fleet
    from sagebox.box.state import load_state

    state = load_state(state_dir)
    roles = {"embedded AWS": [state.aws_pid], "gateway": [state.gateway_pid]} if state else {}
    if state and state.aws_proxy_pid:
        roles["AWS proxy"] = [state.aws_proxy_pid]
    if state and state.registry_pid:
        roles["registry"] = [state.registry_pid]
    roles["serving"] = sorted(
        int(i["pid"])
        for entry in load_fleet(state_dir).values()
        for variant in entry.get("variants", [])
        for i in variant.get("instances", [])
        if i.get("pid")
    )
    return roles


def box_listeners(roles: Mapping[str, Sequence[int]]) -> list[Listener]:
    """The listening sockets of every process of a box: its processes and whatever runs in their sessions."""
    return listening_sockets(session_members(pid for pids in roles.values() for pid in pids))


def wait_gone(pid: int, timeout_s: float = 60.0) -> bool:
    """Until `pid` no longer exists. A killed process lingers as a zombie until its parent reaps it (here init, which
    took ~2 s), and sagebox.box.processes.alive() counts a zombie as running."""
    from sagebox.box import processes

    return poll(lambda: not processes.alive(pid), timeout_s, every_s=0.05)


def run_restart(
    models_dir: Path,
    state_dir: Path,
    target: str,
    body: bytes,
    cli: CliRunner = sagebox_cli,
    clock: Callable[[], float] = time.perf_counter,
) -> RestartRun:
    """`sagebox up`, SIGKILL of its embedded AWS, `sagebox status`, `sagebox up` again; the box is taken down."""
    from sagebox.box.state import load_state
    from sagebox.errors import SageboxError

    up = ["up", "--targets", target, "--models", str(models_dir)]
    endpoint = f"sagebox-{target}"
    try:
        started = clock()
        first = cli(up, state_dir)
        up_s = clock() - started
        if first.returncode != 0:
            raise SageboxError(f"sagebox up failed: {one_line(first.stderr or first.stdout)[-300:]}")
        state = load_state(state_dir)
        assert state is not None
        roles = box_roles(state_dir)
        listeners = box_listeners(roles)
        os.kill(state.aws_pid, signal.SIGKILL)
        if not wait_gone(state.aws_pid):
            raise SageboxError(f"the embedded AWS (pid {state.aws_pid}) did not exit after SIGKILL")
        status = cli(["status"], state_dir)
        started = clock()
        again = cli(up, state_dir)
        up_again_s = clock() - started
        if again.returncode != 0:
            raise SageboxError(f"sagebox up after the kill failed: {one_line(again.stderr or again.stdout)[-300:]}")
        recovered = load_state(state_dir)
        assert recovered is not None
        urls = BoxUrls(recovered.aws_url, recovered.gateway_url, state_dir, recovered.region)
        described = box_client(urls, "sagemaker").describe_endpoint(EndpointName=endpoint)
        answered = Invoker(urls, endpoint, body)().outcome == ANSWER
        roles_after = box_roles(state_dir)
        listeners_after = box_listeners(roles_after)
    finally:
        cli(["down"], state_dir)
    return RestartRun(
        up_s, up_again_s, status, str(described["EndpointStatus"]), answered, listeners, listeners_after, roles,
        roles_after,
    )  # fmt: skip
