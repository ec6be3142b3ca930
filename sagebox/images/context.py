"""Build contexts, assembled explicitly: the same inputs always give the same bytes, and nothing else gets in.

A context holds a Dockerfile and only what its COPY lines need: the serving packages' source files, the
runtime requirements, the wheelhouse and the host's CA bundle (docker-py builds cannot mount volumes).
Files that look like credentials stop the build instead of shipping; caches and hidden files are left out.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import tarfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from sagebox.errors import SageboxError
from sagebox.images.wheelhouse import problems as wheel_problems

# 1980-01-01: every entry gets this mtime, so the archive does not depend on when files were touched.
FIXED_MTIME = 315532800
SKIPPED_DIRS = {"__pycache__", "build", "dist", "node_modules"}
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".egg-info", ".tmp", ".swp")
SECRET_PATTERNS = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "credentials",
    "credentials.*",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".dockercfg",
    "*.token",
    "*.secret",
    "secrets.json",
    "secrets.yaml",
    "secrets.yml",
    "secrets.toml",
)
CA_BUNDLE_ARCNAME = "build/ca-certificates.crt"
CA_BUNDLE_CANDIDATES = (
    Path("/etc/ssl/certs/ca-certificates.crt"),  # Debian, Ubuntu, Alpine
    Path("/etc/pki/tls/certs/ca-bundle.crt"),  # Fedora, RHEL
    Path("/etc/ssl/cert.pem"),  # macOS, BSDs
)


@dataclass(frozen=True)
class Entry:
    arcname: str
    source: Path | None = None  # a regular file; with neither source nor data, a directory
    mode: int = 0o644
    data: bytes | None = None  # contents made by the tool (a derived Dockerfile)

    @property
    def is_dir(self) -> bool:
        return self.source is None and self.data is None


def secret_like(name: str) -> bool:
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_PATTERNS)


def skipped(parts: Sequence[str]) -> bool:
    """Caches, build outputs and hidden files, which never belong in the image."""
    return any(part.startswith(".") or part in SKIPPED_DIRS or part.endswith(SKIPPED_SUFFIXES) for part in parts)


def package_entries(name: str, root: Path) -> list[Entry]:
    entries = [Entry(name, None, 0o755)]
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).parts
        for filename in filenames:
            if secret_like(filename):
                raise SageboxError(f"refusing to build: {here / filename} looks like a secret; move it out of {root}")
        dirnames[:] = sorted(d for d in dirnames if not skipped((*rel_dir, d)))
        for dirname in dirnames:
            entries.append(Entry(str(PurePosixPath(name, *rel_dir, dirname)), None, 0o755))
        for filename in sorted(filenames):
            if skipped((*rel_dir, filename)):
                continue
            path = here / filename
            if not path.is_file():
                continue
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            entries.append(Entry(str(PurePosixPath(name, *rel_dir, filename)), path, mode))
    return entries


def dockerfile_entry(text: str) -> Entry:
    return Entry("Dockerfile", data=text.encode())


def requirements_entries(requirements: Path) -> list[Entry]:
    return [Entry("container", None, 0o755), Entry("container/requirements.txt", requirements)]


def wheel_entries(wheels: Iterable[Path]) -> list[Entry]:
    wheel_paths = sorted(wheels, key=lambda p: p.name)
    found = wheel_problems(p.name for p in wheel_paths)
    if found:
        raise SageboxError(f"refusing the wheelhouse: {found[0]}")
    return [Entry("wheelhouse", None, 0o755), *(Entry(f"wheelhouse/{p.name}", p) for p in wheel_paths)]


def ca_entries(ca_bundle: Path) -> list[Entry]:
    if not ca_bundle.is_file():
        raise SageboxError(f"CA bundle {ca_bundle} does not exist")
    return [Entry("build", None, 0o755), Entry(CA_BUNDLE_ARCNAME, ca_bundle)]


def source_entries(packages: Mapping[str, Path], optional: Iterable[str] = ()) -> list[Entry]:
    """The packages' files; an `optional` package missing from the checkout is an empty directory."""
    entries = []
    for name, root in sorted(packages.items()):
        if root.is_dir():
            entries += package_entries(name, root)
        elif name in set(optional):
            entries.append(Entry(name, None, 0o755))
        else:
            raise SageboxError(f"package directory {root} does not exist")
    return entries


def assemble(*groups: Iterable[Entry]) -> list[Entry]:
    """One sorted list of entries; a name given twice keeps its first entry (directories repeat across groups)."""
    seen: dict[str, Entry] = {}
    for group in groups:
        for entry in group:
            seen.setdefault(entry.arcname, entry)
    return sorted(seen.values(), key=lambda e: e.arcname)


class _HashingWriter:
    def __init__(self, out: BinaryIO | None) -> None:
        self._out = out
        self._hash = hashlib.sha256()
        self._size = 0

    def write(self, data: bytes) -> int:
        self._hash.update(data)
        self._size += len(data)
        if self._out is not None:
            self._out.write(data)
        return len(data)

    def tell(self) -> int:
        return self._size

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def write_tar(entries: Sequence[Entry], out: BinaryIO | None) -> str:
    """Write the entries as a deterministic tar (fixed owner, times, order) to `out`; return its sha256.

    With `out` None nothing is written: the digest alone names a context without storing it.
    """
    writer = _HashingWriter(out)
    with tarfile.open(fileobj=writer, mode="w", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
        for entry in entries:
            info = tarfile.TarInfo(entry.arcname)
            info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = FIXED_MTIME, entry.mode, 0, 0, "", ""
            if entry.is_dir:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.data is not None:
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            else:
                assert entry.source is not None
                info.size = entry.source.stat().st_size
                with entry.source.open("rb") as fh:
                    tar.addfile(info, fh)
    return writer.hexdigest()


def tar_bytes(entries: Sequence[Entry]) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    digest = write_tar(entries, buffer)
    return buffer.getvalue(), digest


def find_ca_bundle(env: Mapping[str, str], exists: Callable[[Path], bool] = Path.is_file) -> Path:
    """The CA bundle the host's pip trusts: PIP_CERT, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, the system's, or certifi's."""
    for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        value = env.get(name, "").strip()
        if value and exists(Path(value)):
            return Path(value)
    for candidate in CA_BUNDLE_CANDIDATES:
        if exists(candidate):
            return candidate
    import certifi

    return Path(certifi.where())
