"""What synth needs to know about a local `model.tar.gz`: the manifest inside it and how big the model is."""

from __future__ import annotations

import struct
import tarfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from container.manifest import MANIFEST_NAME, Manifest, ManifestError, parse
from infra.errors import TargetError

GZIP_MAGIC = b"\x1f\x8b"
_ISIZE_MODULUS = 1 << 32
# Deflate adds at most ~0.03 % to incompressible data; 1 % is a safe floor for "uncompressed >= compressed".
_EXPANSION_SLACK = 0.01


@dataclass(frozen=True)
class ArtifactInfo:
    path: Path
    compressed_bytes: int
    size_bytes: int
    manifest: Manifest | None


def uncompressed_size(compressed_bytes: int, isize: int) -> int:
    """Smallest size matching with gzip's ISIZE trailer (size mod 2**32) and is not below the compressed size.

    Exact below 4 GiB; above it, a lower bound that holds for model weights (they barely compress).
    """
    floor = int(compressed_bytes * (1 - _EXPANSION_SLACK))
    if isize >= floor:
        return isize
    wraps = -(-(floor - isize) // _ISIZE_MODULUS)
    return isize + wraps * _ISIZE_MODULUS


def _read_manifest(path: Path) -> Manifest | None:
    """Stream the tarball until manifest.json; packaging that writes it first makes this read a few KB."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for member in tar:
                if member.name.removeprefix("./") != MANIFEST_NAME:
                    continue
                handle = tar.extractfile(member)
                if handle is None:
                    raise TargetError(f"{path}: {MANIFEST_NAME} inside the tarball is not a regular file")
                return parse(handle.read().decode("utf-8", errors="replace"), f"{path}!{MANIFEST_NAME}")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TargetError(f"{path} is not a readable model.tar.gz: {exc}") from None
    except ManifestError as exc:
        raise TargetError(str(exc)) from None
    return None


@cache
def _read_member(path: Path, size: int, mtime_ns: int, name: str, limit: int) -> bytes | None:
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for member in tar:
                if member.name.removeprefix("./") != name:
                    continue
                if not member.isfile() or member.size > limit:
                    raise TargetError(
                        f"{path}: {name} inside the tarball is not a regular file of at most {limit} bytes"
                    )
                handle = tar.extractfile(member)
                return handle.read() if handle is not None else None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise TargetError(f"{path} is not a readable model.tar.gz: {exc}") from None
    return None


def read_member(path: Path, name: str, limit: int = 1 << 24) -> bytes | None:
    """The bytes of a small file inside a local model.tar.gz (None when it holds no such file), read once per process.
    Sagebox writes members sorted by name, so config.json comes before the weights and this reads a few KB."""
    path = path.resolve()
    stat = path.stat()
    return _read_member(path, stat.st_size, stat.st_mtime_ns, name, limit)


@cache
def _inspect(path: Path, size: int, mtime_ns: int) -> ArtifactInfo:
    with path.open("rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            raise TargetError(f"{path} is not gzip-compressed: SageMaker expects a model.tar.gz")
        fh.seek(-4, 2)
        (isize,) = struct.unpack("<I", fh.read(4))
    return ArtifactInfo(
        path=path,
        compressed_bytes=size,
        size_bytes=uncompressed_size(size, isize),
        manifest=_read_manifest(path),
    )


def inspect_artifact(path: Path) -> ArtifactInfo:
    """Read a local model.tar.gz once per process (cached by path, size and modification time)."""
    path = path.resolve()
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise TargetError(f"model artifact {path} does not exist") from None
    if not path.is_file():
        raise TargetError(f"model artifact {path} is not a file")
    if stat.st_size < 24:
        raise TargetError(f"model artifact {path} is too small to be a model.tar.gz ({stat.st_size} bytes)")
    return _inspect(path, stat.st_size, stat.st_mtime_ns)
