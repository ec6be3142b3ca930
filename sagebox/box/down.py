"""`sagebox down`: stop what `sagebox up` started, delete its stacks, remove its temporary files. Idempotent."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from sagebox.box import processes
from sagebox.box.state import clear_state, load_state
from sagebox.box.up import ROUTES_FILE, box_clients

TEMPORARY = ("endpoints", "logs", ROUTES_FILE)


def tear_down(state_dir: Path, say: Callable[[str], None]) -> int:
    """Number of things stopped or deleted (0 when nothing was running)."""
    state = load_state(state_dir)
    done = 0
    if state is not None:
        for endpoint in state.endpoints.values():
            if endpoint.container_id:
                from sagebox.box.containers import stop_container

                if stop_container(endpoint.container_id):
                    say(f"stopped container {endpoint.container_id[:12]} ({endpoint.target})")
                    done += 1
            elif endpoint.pid and processes.stop(endpoint.pid):
                say(f"stopped endpoint {endpoint.target} (pid {endpoint.pid})")
                done += 1
        if state.gateway_pid and processes.stop(state.gateway_pid):
            say("stopped the runtime gateway")
            done += 1
        if state.aws_pid and processes.alive(state.aws_pid):
            if state.stacks:
                from infra.local import destroy

                cloudformation, _, _ = box_clients(state)
                destroy(cloudformation, state.stacks, poll_s=0.2)
                say(f"deleted {len(state.stacks)} stack(s) from the embedded AWS")
                done += len(state.stacks)
            processes.stop(state.aws_pid)
            say("stopped the embedded AWS")
            done += 1
    for name in TEMPORARY:
        path = state_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    clear_state(state_dir)
    return done
