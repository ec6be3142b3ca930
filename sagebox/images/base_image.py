"""The base image, made offline: a Debian bookworm minbase root filesystem from mmdebstrap, imported once.

No registry serves base images here, so the root filesystem is built from Debian packages and cached as a
tarball in the user cache (made once per machine, reused by every clone); it is imported into whichever
engine is in use through the Docker API.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sagebox.errors import SageboxError

if TYPE_CHECKING:
    import docker

REPOSITORY = "localhost/sagebox-base"
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
# python3-venv brings ensurepip's pip; ca-certificates lets the server make TLS calls if it ever must.
PACKAGES = ("python3", "python3-venv", "ca-certificates")
# Documentation and translations are dead weight in a server image; copyright files stay.
DPKG_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)

Runner = Callable[..., subprocess.CompletedProcess[str]]


@dataclass(frozen=True)
class BaseRecipe:
    suite: str = SUITE
    mirror: str = DEFAULT_MIRROR
    security_mirror: str = DEFAULT_SECURITY_MIRROR
    packages: tuple[str, ...] = PACKAGES
    dpkg_options: tuple[str, ...] = DPKG_OPTIONS

    def sources(self) -> list[str]:
        return [
            f"deb {self.mirror} {self.suite} main",
            f"deb {self.mirror} {self.suite}-updates main",
            f"deb {self.security_mirror} {self.suite}-security main",
        ]

    def argv(self, out: Path) -> list[str]:
        return [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--architectures=amd64",
            f"--include={','.join(self.packages)}",
            *(f"--dpkgopt={option}" for option in self.dpkg_options),
            self.suite,
            str(out),
            *self.sources(),
        ]

    def digest(self) -> str:
        """Names the recipe: a changed recipe makes (and tags) a new base image instead of reusing the old one."""
        return hashlib.sha256("\n".join(self.argv(Path("-"))).encode()).hexdigest()[:12]

    @property
    def tag(self) -> str:
        return f"{self.suite}-{self.digest()}"

    @property
    def image(self) -> str:
        return f"{REPOSITORY}:{self.tag}"


def rootfs_path(cache_dir: Path, recipe: BaseRecipe) -> Path:
    return cache_dir / f"sagebox-base-{recipe.tag}.tar"


def ensure_rootfs(cache_dir: Path, recipe: BaseRecipe, run: Runner, log: Callable[[str], None]) -> Path:
    """The cached root filesystem tarball, made with mmdebstrap when missing (written to a temp path, then moved)."""
    out = rootfs_path(cache_dir, recipe)
    if out.is_file():
        return out
    cache_dir.mkdir(parents=True, exist_ok=True)
    # mmdebstrap picks the output format from the extension: the temp name must still end in .tar.
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.tar")
    log(f"making the base image root filesystem with mmdebstrap ({recipe.suite} minbase; ~1-2 min, once)")
    started = time.monotonic()
    try:
        result = run(recipe.argv(tmp), capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SageboxError(
            "mmdebstrap is missing: run `sagebox containers setup` (or apt-get install mmdebstrap)"
        ) from None
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        raise SageboxError(f"mmdebstrap failed ({result.returncode}): {lines[-1] if lines else 'no output'}")
    os.replace(tmp, out)
    log(f"base root filesystem made in {time.monotonic() - started:.0f}s: {out}")
    return out


def has_image(client: docker.DockerClient, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


def imported_id(response: str) -> str:
    """The image id from an import's JSON progress stream (`{"status": "sha256:..."}` lines)."""
    for line in reversed(response.strip().splitlines()):
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        status = str(item.get("status", "")) if isinstance(item, dict) else ""
        if status.startswith("sha256:"):
            return status
    raise SageboxError(f"the engine did not report an image id for the imported base image: {response.strip()[:200]}")


def import_rootfs(client: docker.DockerClient, rootfs: Path, recipe: BaseRecipe) -> str:
    """Import the root filesystem and tag it `recipe.image` and `<suite>` (the Dockerfile's default)."""
    with rootfs.open("rb") as fh:
        response = client.api.import_image(src=fh, repository=REPOSITORY, tag=recipe.tag)
    # Tag by id: some engines (podman 4.3) ignore the tag on import and call the image `latest`.
    image = client.images.get(imported_id(str(response)))
    image.tag(REPOSITORY, recipe.tag)
    image.tag(REPOSITORY, recipe.suite)
    if f"{REPOSITORY}:latest" in image.tags:  # the name podman gave it, not one we asked for
        client.images.remove(f"{REPOSITORY}:latest")
    return str(image.id)


def ensure_base_image(
    client: docker.DockerClient,
    cache_dir: Path,
    run: Runner,
    log: Callable[[str], None],
    recipe: BaseRecipe | None = None,
) -> str:
    """The base image's name, present in the engine: imported from the cached root filesystem if needed."""
    recipe = recipe or BaseRecipe()
    if has_image(client, recipe.image):
        return recipe.image
    rootfs = ensure_rootfs(cache_dir, recipe, run, log)
    log(f"importing {rootfs.name} as {recipe.image}")
    import_rootfs(client, rootfs, recipe)
    return recipe.image
