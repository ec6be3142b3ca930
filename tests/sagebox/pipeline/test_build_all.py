"""`sagebox build`: all three packaged artifacts from one folder; reruns redo nothing; a bad folder fails cleanly."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.manifest import load_verified
from sagebox.pipeline.package.tarball import unpack_and_verify
from tests.sagebox.conftest import Built, sagebox_cli

sagebox = sagebox_cli


@pytest.mark.slow
def test_build_packages_every_variant_where_cdk_looks(built: Built, tmp_path: Path) -> None:
    work, out, args, first = built.work, built.out, built.args, built.result
    assert first.returncode == 0, first.stderr
    for variant in ("fp32", "int8", "neuron"):
        tarball = out / variant / "model.tar.gz"
        manifest = unpack_and_verify(tarball, tmp_path / "unpacked" / variant)
        assert manifest.variant == variant
        assert manifest == load_verified(work / ("neuron" if variant == "neuron" else f"quantized/{variant}"))
    stamps = {v: (out / v / "model.tar.gz").stat().st_mtime_ns for v in ("fp32", "int8", "neuron")}
    second = sagebox(*args)
    assert second.returncode == 0, second.stderr
    assert {v: (out / v / "model.tar.gz").stat().st_mtime_ns for v in stamps} == stamps  # nothing rebuilt


def test_build_of_a_missing_folder_is_one_line_and_leaves_nothing(dev_json: Path, tmp_path: Path) -> None:
    result = sagebox("build", "--model", str(tmp_path / "nope"), "--eval", str(dev_json), "--out", str(tmp_path / "o"))
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()
