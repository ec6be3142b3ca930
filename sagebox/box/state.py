"""What `sagebox up` started, on disk, so `invoke`, `bench` and `down` (any later process) can find it."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

STATE_FILE = "box.json"


@dataclass
class EndpointState:
    target: str
    endpoint_name: str
    instance_type: str
    variant: str
    stack_name: str
    url: str = ""
    pid: int = 0
    model_dir: str = ""
    log_path: str = ""
    container_id: str = ""


@dataclass
class BoxState:
    region: str = "us-east-1"
    aws_url: str = ""
    aws_pid: int = 0
    gateway_url: str = ""
    gateway_pid: int = 0
    bucket: str = ""
    stacks: list[str] = field(default_factory=list)
    endpoints: dict[str, EndpointState] = field(default_factory=dict)
    mode: str = "processes"  # processes | containers

    def endpoint_for(self, target_or_name: str) -> EndpointState | None:
        if target_or_name in self.endpoints:
            return self.endpoints[target_or_name]
        return next((e for e in self.endpoints.values() if e.endpoint_name == target_or_name), None)

    def endpoint_for_variant(self, variant: str) -> EndpointState | None:
        matches = sorted((e for e in self.endpoints.values() if e.variant == variant), key=lambda e: e.target)
        return matches[0] if matches else None


def load_state(state_dir: Path) -> BoxState | None:
    path = state_dir / STATE_FILE
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    endpoints = {name: EndpointState(**e) for name, e in raw.pop("endpoints", {}).items()}
    return BoxState(**raw, endpoints=endpoints)


def save_state(state_dir: Path, state: BoxState) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=f".{STATE_FILE}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(state), fh, indent=2)
    os.replace(tmp, state_dir / STATE_FILE)


def clear_state(state_dir: Path) -> None:
    (state_dir / STATE_FILE).unlink(missing_ok=True)
