"""What the whole test run builds once, however many pytest-xdist workers share it.

`make test` runs the suite on several workers (pytest-xdist; each worker its own process with its own session
fixtures). A session fixture that builds something expensive (a model build, every task's tiny model) would then be
built once per worker; `run_once` builds it in the run's shared temporary directory (the parent of every worker's
base temp) under a file lock, and the other workers read what the first one built. Without xdist it is a plain call.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from sagebox.locks import file_lock

T = TypeVar("T")


def worker_id() -> str | None:
    """This process's xdist worker ("gw0", ...), or None when pytest runs without workers."""
    return os.environ.get("PYTEST_XDIST_WORKER")


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """Where the run's workers meet: beside every worker's base temp (one temp dir per run, as pytest keeps them)."""
    shared = factory.getbasetemp().parent / "run-once"
    shared.mkdir(exist_ok=True)
    return shared


def run_once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)`'s value, made by the first worker that asks and read (unpickled) by the others.

    `folder` is an empty directory for what `make` writes; the value must be picklable (paths, dataclasses). A
    `make` that raises leaves nothing behind, so the next worker that asks builds it again (and fails the same way).
    """
    if worker_id() is None:
        return make(factory.mktemp(name))
    shared = shared_dir(factory)
    done = shared / f"{name}.pickle"
    with file_lock(shared / f"{name}.lock"):
        if done.is_file():
            value: T = pickle.loads(done.read_bytes())
            return value
        folder = shared / name
        if folder.exists():  # what a failed attempt left
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
    shared = shared_dir(factory) if worker_id() is not None else factory.getbasetemp()
    with file_lock(shared / f"{name}.lock"):
        yield
