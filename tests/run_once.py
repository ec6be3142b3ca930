"""What the whole test run builds once, however many pytest-xdist workers share it.

`make test` runs the suite on several workers (pytest-xdist; each worker its own process with its own session
fixtures). A session fixture that builds something expensive (a model build, every task's tiny model) would then be
built once per worker; `run_once` builds it in the run's shared temporary directory (the parent of every worker's
base temp) under a file lock, and the other workers read what the first one built. Without xdist it is a plain call.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def worker_id() -> str | None:
    """This process's xdist worker ("gw0", ...), or None when pytest runs without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER")


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (flock: released by the kernel if the holder dies)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)`'s value, made by the first worker that asks and read (unpickled) by the others.

    `folder` is an empty directory for what `make` writes; the value must be picklable (paths, dataclasses). A
    `make` that raises leaves nothing behind, so the next worker that asks builds it again (and fails the same way).
    """
    if worker_id() is None:
        return make(factory.mktemp(name))
    shared = factory.getbasetemp().parent / "run-once"
    shared.mkdir(exist_ok=True)
    done = shared / f"{name}.pickle"
    with file_lock(shared / f"{name}.lock"):
        if done.is_file():
            value: T = pickle.loads(done.read_bytes())
            return value
        folder = shared / name
        if folder.exists():  # what a failed attempt left
            import shutil

            shutil.rmtree(folder)
        folder.mkdir()
        value = make(folder)
        partial = done.with_suffix(".partial")
        partial.write_bytes(pickle.dumps(value))
        partial.replace(done)
        return value


@contextmanager
def one_at_a_time(factory: pytest.TempPathFactory, name: str) -> Iterator[None]:
    """Held by one worker of the run at a time (a plain lock without xdist): for work that a second worker would
    only repeat, such as two builds of the serving image, where the second then takes every layer from the cache."""
    shared = factory.getbasetemp().parent / "run-once" if worker_id() is not None else factory.getbasetemp()
    shared.mkdir(exist_ok=True)
    with file_lock(shared / f"{name}.lock"):
        yield
