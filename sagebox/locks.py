"""A lock between processes on one machine: two `sagebox` commands (or test workers) that would make the same file."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Held by one process at a time (flock on `path`, created if absent): released on exit from the block, or by
    the kernel if the holder dies, so a killed command never leaves it held."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
