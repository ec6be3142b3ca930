"""`custom_op.load_library`: load a built custom-op library into this process (imports only torch)."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuron_emu.errors import CustomOpLoadError


@dataclass(frozen=True)
class LoadedLibrary:
    path: Path
    namespace: str
    ops: tuple[str, ...]
    multicore: bool
    sha256: str
    info: dict[str, Any]


_LOCK = threading.Lock()
_BY_SHA: dict[str, LoadedLibrary] = {}
_BY_NAMESPACE: dict[str, LoadedLibrary] = {}


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _library_info(path: Path) -> dict[str, Any]:
    handle = ctypes.CDLL(str(path))
    try:
        info_fn = handle.nemu_library_info
    except AttributeError:
        raise CustomOpLoadError(
            f"{path.name} is not a neuron_emu custom-op library (build it with neuron_emu.custom_op.load)"
        ) from None
    info_fn.restype = ctypes.c_char_p
    raw = info_fn() or b"{}"
    info: dict[str, Any] = json.loads(raw.decode("utf-8", errors="replace"))
    return info


def load_library(path: str | os.PathLike[str]) -> LoadedLibrary:
    """Load `lib<name>.so`, registering its ops as `torch.ops.<namespace>.<op>`; a second load is a no-op."""
    library_path = Path(path).expanduser().resolve()
    if not library_path.is_file():
        raise CustomOpLoadError(f"custom-op library {path} does not exist")
    digest = _sha256(library_path)
    with _LOCK:
        known = _BY_SHA.get(digest)
        if known is not None:
            return known
        import torch

        try:
            torch.ops.load_library(str(library_path))
        except OSError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CustomOpLoadError(f"cannot load {library_path.name}: {first}") from None
        info = _library_info(library_path)
        namespace = str(info.get("namespace", ""))
        error = str(info.get("error", ""))
        if error:
            other = _BY_NAMESPACE.get(namespace)
            if other is not None:
                raise CustomOpLoadError(
                    f"{library_path.name}: the custom-op namespace '{namespace}' is already loaded from "
                    f"{other.path} "
                    "(one library per namespace per process; restart Python to use a rebuilt library)"
                )
            raise CustomOpLoadError(f"{library_path.name}: {error}")
        loaded = LoadedLibrary(
            path=library_path,
            namespace=namespace,
            ops=tuple(str(op["name"]) for op in info.get("ops", [])),
            multicore=bool(info.get("multicore", False)),
            sha256=digest,
            info=info,
        )
        _BY_SHA[digest] = loaded
        _BY_NAMESPACE[namespace] = loaded
        return loaded


def loaded_libraries() -> dict[str, LoadedLibrary]:
    """Custom-op libraries loaded in this process, by op namespace."""
    with _LOCK:
        return dict(_BY_NAMESPACE)
