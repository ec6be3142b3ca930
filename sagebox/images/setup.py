"""`sagebox containers setup`: a Docker-API engine that answers, with the offline base image in it."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sagebox.errors import SageboxError
from sagebox.images import base_image, engine, podman
from sagebox.images.dirs import Paths
from sagebox.locks import file_lock


@dataclass(frozen=True)
class Ready:
    engine: engine.Engine
    base_image: str
    installed: tuple[str, ...]  # Debian packages this run installed
    started_service: bool
    seconds: float


def recipe_from_env(env: Mapping[str, str]) -> base_image.BaseRecipe:
    return base_image.BaseRecipe(
        mirror=env.get("SAGEBOX_DEBIAN_MIRROR") or base_image.DEFAULT_MIRROR,
        security_mirror=env.get("SAGEBOX_DEBIAN_SECURITY_MIRROR") or base_image.DEFAULT_SECURITY_MIRROR,
    )


def setup(
    paths: Paths,
    env: Mapping[str, str] | None = None,
    run: podman.Runner = subprocess.run,
    log: Callable[[str], None] = lambda line: None,
    is_root: bool | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Ready:
    """Use the user's Docker Engine when one answers; otherwise install and start podman for this project. One caller
    at a time (a file lock): two commands, or two test workers, that need an engine at once share one set-up."""
    paths.state.mkdir(parents=True, exist_ok=True)
    with file_lock(paths.state / "engine-setup.lock"):
        return _setup(paths, env, run, log, is_root, clock)


def _setup(
    paths: Paths,
    env: Mapping[str, str] | None,
    run: podman.Runner,
    log: Callable[[str], None],
    is_root: bool | None,
    clock: Callable[[], float],
) -> Ready:
    started = clock()
    env = os.environ if env is None else env
    is_root = os.geteuid() == 0 if is_root is None else is_root
    chosen = engine.choose_engine(env, lambda: engine.answers(f"unix://{engine.DOCKER_SOCKET}"), paths.socket)
    log(f"engine: {chosen.kind} at {chosen.base_url} ({chosen.why})")
    installed: list[str] = []
    started_service = False
    if chosen.kind == "podman":
        missing = podman.missing_packages(podman.installed_packages(run))
        podman.install_packages(run, missing, is_root, log)
        installed += missing
        podman.write_config(paths)
        if not engine.answers(chosen.base_url):
            pid = podman.start_service(paths, lambda: engine.answers(chosen.base_url))
            log(f"started podman system service (pid {pid}) on {paths.socket}; log: {paths.service_log}")
            started_service = True
    elif not engine.answers(chosen.base_url):
        raise SageboxError(f"no Docker API answers at {chosen.base_url} ({chosen.why})")
    recipe = recipe_from_env(env)
    client = engine.connect(chosen.base_url)
    try:
        needs_mmdebstrap = not (
            base_image.has_image(client, recipe.image)
            or base_image.rootfs_path(paths.base_images, recipe).is_file()
            or shutil.which("mmdebstrap")
        )
        if needs_mmdebstrap:
            podman.install_packages(run, ["mmdebstrap"], is_root, log)
            installed.append("mmdebstrap")
        image = base_image.ensure_base_image(client, paths.base_images, run, log, recipe)
    finally:
        client.close()
    return Ready(chosen, image, tuple(installed), started_service, clock() - started)
