"""Where the container tooling keeps its state: project-local under `<repo>/.sagebox/`, plus a per-user cache.

The engine (podman's storage, socket and service) belongs to the checkout, not to one box: a box started with
another SAGEBOX_STATE_DIR (tests do) uses the same engine, its images and build cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Unix socket paths are limited to 108 bytes (sun_path); stay well below.
MAX_SOCKET_PATH = 100


@dataclass(frozen=True)
class Paths:
    repo: Path
    state: Path  # project-local and git-ignored
    cache: Path  # per user, survives fresh clones: things that are slow to make and never change

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, repo: Path = REPO) -> Paths:
        from sagebox.paths import cache_dir

        return cls(repo=repo, state=repo / ".sagebox", cache=cache_dir(env))

    @property
    def podman(self) -> Path:
        return self.state / "podman"

    @property
    def containers_conf(self) -> Path:
        return self.podman / "containers.conf"

    @property
    def storage_conf(self) -> Path:
        return self.podman / "storage.conf"

    @property
    def service_log(self) -> Path:
        return self.podman / "service.log"

    @property
    def service_pid(self) -> Path:
        return self.podman / "service.pid"

    @property
    def socket(self) -> Path:
        return socket_path(self.podman)

    @property
    def image(self) -> Path:
        return self.state / "image"

    @property
    def base_images(self) -> Path:
        return self.cache / "base-images"


def socket_path(podman_dir: Path) -> Path:
    """The podman API socket: inside the project when the path fits a unix socket, else a short per-project path."""
    wanted = podman_dir / "podman.sock"
    if len(str(wanted)) <= MAX_SOCKET_PATH:
        return wanted
    digest = hashlib.sha256(str(podman_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"sagebox-{digest}" / "podman.sock"
