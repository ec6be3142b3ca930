"""What the embedded AWS process is started with (one place for its command line), and the box's time scale."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sagebox.errors import SageboxError

ACCOUNT = "123456789012"
REGION = "us-east-1"
# moto accepts any key; these never leave the machine.
ACCESS_KEY = "testing"

Mode = Literal["processes", "containers"]

# Box time: every wait SageMaker, CloudWatch and Application Auto Scaling would make (a deployment's bake and
# termination wait, an alarm's period, a scaling cooldown, the minute of "invocations per minute") lasts this many
# times its real length in the box. 1 (the default) runs them as AWS does; 0.05 makes a 300 s bake last 15 s
# and a 60 s alarm period 3 s. Read by the embedded AWS process, so `SAGEBOX_BOX_TIME_SCALE=0.05 sagebox up`
# shortens them without a change to any template or code.
TIME_SCALE_ENV = "SAGEBOX_BOX_TIME_SCALE"
MIN_TIME_SCALE = 0.001


def time_scale(environ: Mapping[str, str]) -> float:
    """The box's time scale from the environment (1.0 when unset); one clear error for a bad value."""
    raw = environ.get(TIME_SCALE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        scale = float(raw)
    except ValueError:
        raise SageboxError(f"{TIME_SCALE_ENV}={raw!r} is not a number (0.05: box waits last 1/20 of AWS's)") from None
    if not math.isfinite(scale) or not MIN_TIME_SCALE <= scale <= 1.0:
        raise SageboxError(f"{TIME_SCALE_ENV}={raw!r} must be between {MIN_TIME_SCALE:g} and 1 (1: AWS's own waits)")
    return scale


@dataclass(frozen=True)
class EmbeddedAwsConfig:
    port: int
    state_dir: Path
    mode: Mode = "processes"
    region: str = REGION
    # The local OCI registry behind ECR (host:port, and the CA that signed its certificate); None: no registry.
    registry_host: str | None = None
    registry_ca: Path | None = None
    # Docker API of the engine that runs containers (containers mode).
    docker_host: str | None = None
    # See TIME_SCALE_ENV; the server reads the environment when this is None.
    time_scale: float | None = None
    # Snapshot moto's state into the state directory and restore it at start (sagebox.box.embedded_aws.persistence).
    persist: bool = False

    @property
    def url(self) -> str:
        # "localhost", not 127.0.0.1: the CDK CLI reads a leading "127" as a bucket name (FACTS.md).
        return f"http://localhost:{self.port}"

    def argv(self) -> list[str]:
        args = ["--port", str(self.port), "--state-dir", str(self.state_dir), "--mode", self.mode]
        args += ["--region", self.region]
        if self.registry_host:
            args += ["--registry-host", self.registry_host]
        if self.registry_ca:
            args += ["--registry-ca", str(self.registry_ca)]
        if self.docker_host:
            args += ["--docker-host", self.docker_host]
        if self.time_scale is not None:
            args += ["--time-scale", repr(self.time_scale)]
        if self.persist:
            args += ["--persist"]
        return args


# Written into the box's state directory by the embedded AWS before it answers: how the runtime gateway (another
# process) reaches the embedded CloudWatch, and the box's time scale.
EMBEDDED_AWS_FILE = "embedded-aws.json"
# The finest metric resolution the gateway uses, whatever the time scale (real seconds).
MIN_RESOLUTION_S = 0.1


@dataclass(frozen=True)
class EndpointFile:
    url: str
    region: str
    time_scale: float

    @property
    def resolution_s(self) -> float:
        """One box second in real seconds (CloudWatch's finest resolution), at least MIN_RESOLUTION_S."""
        return max(MIN_RESOLUTION_S, self.time_scale)


def write_endpoint_file(state_dir: Path, found: EndpointFile) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=state_dir, prefix=f".{EMBEDDED_AWS_FILE}.")
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": found.url, "region": found.region, "time_scale": found.time_scale}, fh)
    os.replace(tmp, state_dir / EMBEDDED_AWS_FILE)


def read_endpoint_file(state_dir: Path) -> EndpointFile | None:
    try:
        raw = json.loads((state_dir / EMBEDDED_AWS_FILE).read_text())
        return EndpointFile(str(raw["url"]), str(raw["region"]), float(raw.get("time_scale", 1.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
