"""What the embedded AWS process is started with (one place for its command line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ACCOUNT = "123456789012"
REGION = "us-east-1"
# moto accepts any key; these never leave the machine.
ACCESS_KEY = "testing"

Mode = Literal["processes", "containers"]


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
        return args
