"""The build's wheelhouse: every runtime wheel for linux/amd64 CPython 3.11, with the CPU torch wheel.

pip downloads for the image's platform (not the host's), from the indexes and find-links pip is configured
with here (this machine's find-links hold torch 2.13.0+cpu). A CUDA torch, or any NVIDIA wheel, is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagebox.errors import SageboxError
from sagebox.locks import file_lock

Runner = Callable[..., subprocess.CompletedProcess[str]]

CUDA_WHEEL_PREFIXES = ("nvidia_", "nvidia-", "triton-", "cuda_", "cuda-")
CPU_TORCH_HINT = (
    "give pip the CPU wheel: a find-links directory holding torch-2.13.0+cpu, or "
    "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu"
)


@dataclass(frozen=True)
class Target:
    """The image's interpreter: Debian bookworm's CPython 3.11 on glibc 2.36, x86_64."""

    python_version: str = "3.11"
    abi: str = "cp311"
    glibc: tuple[int, int] = (2, 36)
    arch: str = "x86_64"

    def platforms(self) -> list[str]:
        """Every manylinux tag the target's glibc accepts, newest first (pip does not expand them itself)."""
        major, minor = self.glibc
        tags = [f"manylinux_{major}_{m}_{self.arch}" for m in range(minor, 4, -1)]
        return [*tags, f"manylinux2014_{self.arch}", f"manylinux2010_{self.arch}", f"manylinux1_{self.arch}"]

    def pip_args(self) -> list[str]:
        args = ["--only-binary=:all:", "--python-version", self.python_version, "--implementation", "cp"]
        for abi in (self.abi, "abi3", "none"):
            args += ["--abi", abi]
        for platform in self.platforms():
            args += ["--platform", platform]
        return args


def download_argv(requirements: Path, dest: Path, target: Target, python: str = sys.executable) -> list[str]:
    return [python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", str(dest),
            *target.pip_args(), "-r", str(requirements)]  # fmt: skip


def problems(wheel_names: Iterable[str]) -> list[str]:
    """Why these wheels must not go into the image (empty when they may)."""
    names = sorted(wheel_names)
    found = []
    torch = [n for n in names if n.lower().startswith("torch-")]
    if not torch:
        found.append("no torch wheel")
    for name in torch:
        version = name.split("-")[1]
        if "+cpu" not in version:
            found.append(f"{name} is not a CPU build (a CPU wheel's version ends in +cpu)")
    found += [f"{n} is a CUDA package" for n in names if n.lower().startswith(CUDA_WHEEL_PREFIXES)]
    found += [f"{n} is not a wheel" for n in names if not n.endswith(".whl")]
    return found


def key(requirements_text: str, target: Target) -> str:
    """Names a wheelhouse by what it was made from, so a changed requirement makes a new one."""
    text = "\n".join([requirements_text, *target.pip_args()])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def ensure_wheelhouse(
    requirements: Path,
    parent: Path,
    run: Runner,
    log: Callable[[str], None],
    target: Target | None = None,
    python: str = sys.executable,
) -> Path:
    """A checked wheelhouse for `requirements`, downloaded once (to a temp dir, then moved into place).

    Two commands that need it at once (two `sagebox up --containers`, or test workers) download it once: the second
    waits on a lock beside it and finds it made."""
    target = target or Target()
    out = parent / f"wheelhouse-{key(requirements.read_text(), target)}"
    if out.is_dir():
        return out
    parent.mkdir(parents=True, exist_ok=True)
    with file_lock(parent / ".wheelhouse.lock"):
        if out.is_dir():
            return out
        return _download(requirements, parent, out, run, log, target, python)


def _download(
    requirements: Path, parent: Path, out: Path, run: Runner, log: Callable[[str], None], target: Target, python: str
) -> Path:
    tmp = parent / f".{out.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    log(f"downloading the image's wheels for {target.arch} CPython {target.python_version} into {out}")
    result = run(download_argv(requirements, tmp, target, python), capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")] or ["no output"]
        raise SageboxError(f"pip download failed: {errors[0].removeprefix('ERROR: ')}; {CPU_TORCH_HINT}")
    found = problems(path.name for path in tmp.iterdir())
    if found:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SageboxError(f"refusing the wheelhouse: {found[0]}; {CPU_TORCH_HINT}")
    os.replace(tmp, out)
    for old in parent.glob("wheelhouse-*"):
        if old != out:
            shutil.rmtree(old, ignore_errors=True)
    return out


def wheels(wheelhouse: Path) -> Sequence[Path]:
    return sorted(p for p in wheelhouse.iterdir() if p.is_file())
