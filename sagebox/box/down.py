"""`sagebox down`: stop what `sagebox up` started, endpoints first, and remove its temporary files. Idempotent.

The registry's storage (`.sagebox/registry`) stays, like an engine's images: `make clean` removes it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sagebox.box import processes
from sagebox.box.reconciler import ROUTES_FILE
from sagebox.box.state import load_state

Say = Callable[[str], None]


def tear_down(state_dir: Path, say: Say, keep_data: bool = False) -> int:
    """Stop what `sagebox up` started (endpoints first) and remove its temporary files; 0 when nothing ran.

    The box's data (the embedded AWS's snapshot and the gateway's async journal) goes too, unless `keep_data`:
    `sagebox up` keeps it when it clears a box that died, and starts the new one from it."""
    from sagebox.box import registry
    from sagebox.box.async_journal import JOURNAL_DIR
    from sagebox.box.embedded_aws.persistence import SNAPSHOT_DIR
    from sagebox.box.reconciler import FLEET_FILE, load_fleet
    from sagebox.box.state import clear_state

    state = load_state(state_dir)
    done = 0
    if state is not None:
        # The embedded AWS stops its endpoints' instances on SIGTERM (SageMaker's 30 s grace each).
        stops = (
            (state.aws_pid, "the embedded AWS and its endpoints"),
            (state.gateway_pid, "the gateway"),
            (state.aws_proxy_pid, "the AWS proxy"),
        )
        for pid, what in stops:
            if pid and processes.stop(pid, timeout=40):
                say(f"stopped {what}")
                done += 1
        done += _stop_leftovers(load_fleet(state_dir), state.docker_host, say)
        if state.registry_pid and processes.stop(state.registry_pid):
            say("stopped the registry")
            done += 1
        if state.registry_host:
            registry.untrust(state.registry_host)
    data = () if keep_data else (SNAPSHOT_DIR, JOURNAL_DIR)
    for name in ("endpoints", "logs", ROUTES_FILE, FLEET_FILE, *data):
        path = state_dir / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    clear_state(state_dir)
    return done


def _instances(fleet: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(endpoint, instance) for every instance fleet.json records: serving, being deployed, or retiring."""
    found = []
    for endpoint, entry in fleet.items():
        groups = [entry, entry.get("update") or {}, *(entry.get("retiring") or [])]
        for group in groups:
            for variant in group.get("variants", []) if isinstance(group, dict) else []:
                found += [(endpoint, instance) for instance in variant.get("instances", [])]
    return found


def _stop_leftovers(fleet: dict[str, Any], docker_host: str, say: Say) -> int:
    """Instances the embedded AWS could not stop (it was killed): processes by pid, containers by id."""
    stopped = 0
    containers = []
    for endpoint, instance in _instances(fleet):
        pid = int(instance.get("pid") or 0)
        if pid and processes.stop(pid):
            say(f"stopped a leftover instance of {endpoint} (pid {pid})")
            stopped += 1
        if instance.get("kind") == "container" and instance.get("id"):
            containers.append((endpoint, str(instance["id"])))
    if containers and docker_host:
        import docker
        import docker.errors

        client = docker.DockerClient(base_url=docker_host, version="auto")
        try:
            for endpoint, container_id in containers:
                try:
                    container = client.containers.get(container_id)
                except docker.errors.NotFound:
                    continue
                container.stop(timeout=30)
                container.remove(force=True)
                say(f"stopped a leftover container of {endpoint} ({container_id[:12]})")
                stopped += 1
        finally:
            client.close()
    return stopped
