"""Atomic model directories: all or nothing, readable by any user."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from sagebox.pipeline.export.artifact import staged_dir


def test_success_swaps_in_a_world_readable_directory(tmp_path: Path) -> None:
    out = tmp_path / "model"
    with staged_dir(out) as staging:
        (staging / "sub").mkdir()
        (staging / "sub" / "weights.bin").write_bytes(b"x")
    assert (out / "sub" / "weights.bin").read_bytes() == b"x"
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "sub").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "sub" / "weights.bin").stat().st_mode) == 0o644


def test_failure_leaves_the_previous_directory_and_no_staging(tmp_path: Path) -> None:
    out = tmp_path / "model"
    with staged_dir(out) as staging:
        (staging / "v1").write_text("old")
    with pytest.raises(RuntimeError), staged_dir(out) as staging:
        (staging / "v2").write_text("half")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in out.iterdir()) == ["v1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
