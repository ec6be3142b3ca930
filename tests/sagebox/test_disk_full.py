"""A disk that fills while packaging or while the box downloads model data: one clear error, nothing partial left.

A real filesystem that is full: a small tmpfs mounted for the test (CI runs as root, as this machine does).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagebox.errors import SageboxError


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {result.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def test_packaging_onto_a_full_disk_is_one_line_and_leaves_nothing(tiny_onnx_model_dir: Path, small_disk: Path) -> None:
    from sagebox.pipeline.package.tarball import package_model_dir

    with pytest.raises(
        SageboxError, match=r"^no space left on the device holding .* while writing model\.tar\.gz"
    ) as info:
        package_model_dir(tiny_onnx_model_dir, small_disk / "out" / "model.tar.gz")
    assert "\n" not in str(info.value)
    assert [p.name for p in (small_disk / "out").iterdir()] == []  # no partial tarball


def test_the_box_downloading_onto_a_full_disk_fails_the_endpoint_cleanly(
    tiny_model_tarball: Path, small_disk: Path
) -> None:
    from sagebox.box.fleet import fetch_model_data

    class LocalS3:
        def download_file(self, bucket: str, key: str, filename: str) -> None:
            with open(tiny_model_tarball, "rb") as source, open(filename, "wb") as dest:
                while chunk := source.read(64 * 1024):
                    dest.write(chunk)

    with pytest.raises(SageboxError, match=r"^Could not download model data from s3://b/k: .*No space left") as info:
        fetch_model_data(LocalS3(), "s3://b/k", small_disk / "endpoints" / "ep" / "model")
    assert "\n" not in str(info.value)
    assert [p.name for p in (small_disk / "endpoints" / "ep").iterdir()] == []  # no partial download or model
