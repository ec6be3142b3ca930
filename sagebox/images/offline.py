"""A container engine and the build arguments of an offline image build: what this machine, CI and the box use.

No registry serves base images here and pip reaches PyPI only (not PyTorch's CPU index), so the serving image is
built from the base image `sagebox containers setup` made (mmdebstrap) and from a wheelhouse downloaded once into
`build/wheelhouse-<key>` (inside the build context). Both are build arguments only (BASE_IMAGE, WHEELHOUSE): the
Dockerfile and the repository do not change. With SAGEBOX_ONLINE_BUILD=1 (a machine with internet) neither is
given and the build uses the Dockerfile's defaults (ECR Public's Python image, PyPI and the CPU wheel index).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sagebox.paths import REPO

ONLINE = "SAGEBOX_ONLINE_BUILD"


@dataclass(frozen=True)
class BuildEnvironment:
    docker_host: str  # Docker API of the engine (a Docker Engine, or this project's podman)
    base_image: str | None  # BASE_IMAGE, when the public one cannot be pulled
    wheelhouse: str | None  # WHEELHOUSE, relative to the repository (the build context)


def prepare(say: Callable[[str], None], env: Mapping[str, str] | None = None) -> BuildEnvironment:
    from sagebox.images import wheelhouse
    from sagebox.images.dirs import Paths
    from sagebox.images.setup import setup

    env = os.environ if env is None else env
    ready = setup(Paths.from_env(), log=say)
    if env.get(ONLINE, "").strip() in ("1", "true", "yes"):
        return BuildEnvironment(ready.engine.base_url, None, None)
    requirements = REPO / "container" / "requirements.txt"
    folder = wheelhouse.ensure_wheelhouse(requirements, REPO / "build", subprocess.run, say)
    return BuildEnvironment(ready.engine.base_url, ready.base_image, folder.relative_to(REPO).as_posix())
