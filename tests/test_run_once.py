"""run_once: what the test run builds once is built once, however many xdist workers ask at the same time."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from tests.run_once import one_at_a_time, run_once


class Factory:
    """The two methods of pytest's TempPathFactory that run_once uses, over one base temp per worker."""

    def __init__(self, root: Path, worker: str) -> None:
        self.base = root / f"popen-{worker}"
        self.base.mkdir(parents=True, exist_ok=True)

    def getbasetemp(self) -> Path:
        return self.base

    def mktemp(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path


def make(folder: Path) -> Path:
    with (folder.parent / "calls").open("a") as calls:  # beside the shared folder: one line a build
        calls.write("built\n")
    (folder / "model").write_text("weights")
    return folder / "model"


def ask(root: Path, worker: str, start: multiprocessing.synchronize.Event, answers: multiprocessing.Queue) -> None:
    import os

    os.environ["PYTEST_XDIST_WORKER"] = worker
    start.wait()
    answers.put(str(run_once(Factory(root, worker), "model", make)))  # type: ignore[arg-type]


def test_workers_asking_at_once_share_one_build(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    start, answers = context.Event(), context.Queue()
    workers = [context.Process(target=ask, args=(tmp_path, f"gw{i}", start, answers)) for i in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    got = {answers.get(timeout=60) for _ in workers}
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    assert got == {str(tmp_path / "run-once" / "model" / "model")}
    assert (tmp_path / "run-once" / "calls").read_text() == "built\n"


def test_a_failed_build_is_tried_again_by_the_next_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")

    def broken(folder: Path) -> Path:
        (folder / "half").write_text("written before the failure")
        raise RuntimeError("no disk")

    with pytest.raises(RuntimeError, match="no disk"):
        run_once(Factory(tmp_path, "gw0"), "model", broken)  # type: ignore[arg-type]
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    built = run_once(Factory(tmp_path, "gw1"), "model", make)  # type: ignore[arg-type]
    assert built.read_text() == "weights" and not (built.parent / "half").exists()


def test_without_workers_it_is_a_plain_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    first = run_once(Factory(tmp_path, "main"), "model", make)  # type: ignore[arg-type]
    assert first.parent.parent == tmp_path / "popen-main" and not (tmp_path / "run-once").exists()


def hold(root: Path, worker: str, start: multiprocessing.synchronize.Event) -> None:
    import os

    os.environ["PYTEST_XDIST_WORKER"] = worker
    start.wait()
    with one_at_a_time(Factory(root, worker), "build"), (root / "trace").open("a") as trace:  # type: ignore[arg-type]
        for step in ("in", "out"):
            trace.write(f"{worker} {step}\n")
            trace.flush()
            time.sleep(0.05)  # widens the window in which an unlocked second worker would interleave


def test_one_at_a_time_never_overlaps(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    start = context.Event()
    workers = [context.Process(target=hold, args=(tmp_path, f"gw{i}", start)) for i in range(3)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    lines = (tmp_path / "trace").read_text().split()
    pairs = [lines[i : i + 4] for i in range(0, len(lines), 4)]
    assert len(pairs) == 3 and all(p[0] == p[2] and (p[1], p[3]) == ("in", "out") for p in pairs)
