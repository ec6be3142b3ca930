"""What `sagebox up` started, on disk, so `env`, `status`, `invoke`, `bench` and `down` (any later process) find it.

Endpoints are not recorded here: the embedded SageMaker knows them, and the control plane writes what runs behind
each one (`fleet.json`, see sagebox.box.reconciler).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

STATE_FILE = "box.json"


@dataclass
class BoxState:
    region: str = "us-east-1"
    mode: str = "processes"  # processes | containers
    aws_url: str = ""
    aws_pid: int = 0
    gateway_url: str = ""
    gateway_pid: int = 0
    aws_proxy_url: str = ""  # http://127.0.0.1:PORT: the proxy that answers hard-coded AWS hostnames (HTTPS_PROXY)
    aws_proxy_pid: int = 0
    ca_bundle: str = ""  # this machine's CAs plus the box's (AWS_CA_BUNDLE, SSL_CERT_FILE, ...)
    registry_host: str = ""  # 127.0.0.1:PORT of the registry behind ECR (containers mode)
    registry_pid: int = 0
    docker_host: str = ""  # the engine cdk-assets builds with and the control plane runs containers on
    base_image: str = ""  # offline builds: the base image already in that engine
    wheelhouse: str = ""  # offline builds: wheels inside the repository (the image build's WHEELHOUSE)
    models_dir: str = ""  # the packaged models `sagebox up` deployed (model_dir of the CDK app)
    models_source: str = ""  # "yours" (build/models or --models) or "demo"
    stacks: list[str] = field(default_factory=list)


def load_state(state_dir: Path) -> BoxState | None:
    path = state_dir / STATE_FILE
    if not path.is_file():
        return None
    raw = json.loads(path.read_text())
    known = {f.name for f in fields(BoxState)}
    return BoxState(**{k: v for k, v in raw.items() if k in known})


def save_state(state_dir: Path, state: BoxState) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=f".{STATE_FILE}.")
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(state), fh, indent=2)
    os.replace(tmp, state_dir / STATE_FILE)


def clear_state(state_dir: Path) -> None:
    (state_dir / STATE_FILE).unlink(missing_ok=True)
