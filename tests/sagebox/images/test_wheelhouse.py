"""The image's wheelhouse: downloaded once into place, whoever asks for it at the same time."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from sagebox.errors import SageboxError
from sagebox.images.wheelhouse import ensure_wheelhouse


class StandInPip:
    """`pip download` as the wheelhouse calls it: writes the wheels into --dest, counts its calls."""

    def __init__(self, wheels: tuple[str, ...] = ("torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl",)) -> None:
        self.wheels, self.calls, self.lock = wheels, 0, threading.Lock()
        self.inside = threading.Event()

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        with self.lock:
            self.calls += 1
        self.inside.set()
        dest = Path(argv[argv.index("--dest") + 1])
        for name in self.wheels:
            (dest / name).write_bytes(b"wheel")
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_two_callers_at_once_download_it_once(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.13.0\n")
    pip = StandInPip()
    got: list[Path] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        got.append(ensure_wheelhouse(requirements, tmp_path / "build", pip, lambda line: None))

    callers = [threading.Thread(target=ask) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(timeout=60)
    assert pip.calls == 1 and len(set(got)) == 1 and len(got) == 4
    [made] = set(got)
    assert [p.name for p in made.iterdir()] == list(pip.wheels)
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == [".wheelhouse.lock", made.name]


def test_a_cuda_torch_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("torch==2.13.0\n")
    pip = StandInPip(("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",))
    with pytest.raises(SageboxError, match="not a CPU build"):
        ensure_wheelhouse(requirements, tmp_path / "build", pip, lambda line: None)
    assert [p.name for p in (tmp_path / "build").iterdir()] == [".wheelhouse.lock"]
