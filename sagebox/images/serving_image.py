"""The serving image, ready to run: engine set up, build inputs assembled, image built or found up to date."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

    from sagebox.images.builder import BuildInputs, BuiltImage
    from sagebox.images.dirs import Paths


def build_inputs(paths: Paths, base_image: str, log: Callable[[str], None]) -> BuildInputs:
    import container
    from sagebox.images import context, wheelhouse
    from sagebox.images.builder import serving_inputs

    requirements = paths.repo / "container" / "requirements.txt"
    wheels = wheelhouse.wheels(wheelhouse.ensure_wheelhouse(requirements, paths.image, subprocess.run, log))
    return serving_inputs(paths.repo, wheels, context.find_ca_bundle(os.environ), base_image, container.__version__)


def ensure_serving_image(
    log: Callable[[str], None], verbose: bool = False, paths: Paths | None = None
) -> tuple[docker.DockerClient, BuiltImage]:
    """Set up the engine (Docker Engine, else podman), build the image if its inputs changed; client + image."""
    from sagebox.images import engine
    from sagebox.images.builder import build_image
    from sagebox.images.dirs import Paths
    from sagebox.images.setup import setup

    paths = paths or Paths.from_env()
    ready = setup(paths, log=log)
    inputs = build_inputs(paths, ready.base_image, log)
    client = engine.connect(ready.engine.base_url)
    log(f"building {inputs.tag} ({'output follows' if verbose else 'output in .sagebox/image/build.log'})")
    built = build_image(client, inputs, paths.image, log=log if verbose else lambda line: None)
    state = "built" if built.rebuilt else "up to date"
    log(f"{built.tag} {state} in {built.seconds:.1f}s: {built.id[:19]}, {built.size_bytes / 1e6:.0f} MB")
    return client, built
