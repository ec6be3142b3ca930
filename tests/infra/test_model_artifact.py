from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from infra.errors import TargetError
from infra.model_artifact import inspect_artifact, uncompressed_size
from tests.infra.model_tarballs import write_tarball

GIB = 2**30


def test_reads_the_manifest_and_the_exact_size_below_4_gib(tmp_path: Path) -> None:
    path = write_tarball(tmp_path / "model.tar.gz", "int8", payload=os.urandom(50_000))
    info = inspect_artifact(path)
    assert info.manifest is not None and info.manifest.variant == "int8"
    assert info.size_bytes == len(gzip.decompress(path.read_bytes()))
    assert info.compressed_bytes == path.stat().st_size


def test_finds_a_manifest_that_is_not_the_first_member(tmp_path: Path) -> None:
    path = write_tarball(tmp_path / "model.tar.gz", "neuron", manifest_first=False)
    info = inspect_artifact(path)
    assert info.manifest is not None and info.manifest.variant == "neuron"


def test_a_tarball_without_manifest_has_none(tmp_path: Path) -> None:
    assert inspect_artifact(write_tarball(tmp_path / "model.tar.gz", None)).manifest is None


def test_rewritten_file_is_read_again(tmp_path: Path) -> None:
    path = write_tarball(tmp_path / "model.tar.gz", "fp32")
    assert inspect_artifact(path).manifest.variant == "fp32"  # type: ignore[union-attr]
    write_tarball(path, "int8", payload=b"\1" * 5000)
    os.utime(path, ns=(1, 2))
    assert inspect_artifact(path).manifest.variant == "int8"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("compressed", "isize", "expected"),
    [
        (400_000, 1_000_000, 1_000_000),  # below 4 GiB the trailer is the size
        (int(4.5 * GIB), 1 * GIB, 5 * GIB),  # wrapped once: 5 GiB of weights barely compress
        (int(9.6 * GIB), 2 * GIB, 10 * GIB),  # wrapped twice
        (1000, 995, 995),  # incompressible data grows a little when gzipped
    ],
)
def test_uncompressed_size_unwraps_the_gzip_trailer(compressed: int, isize: int, expected: int) -> None:
    assert uncompressed_size(compressed, isize) == expected


def test_unusable_files_raise_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        inspect_artifact(tmp_path / "missing.tar.gz")
    plain = tmp_path / "plain.tar"
    plain.write_bytes(b"not gzip at all, just bytes" * 4)
    with pytest.raises(TargetError, match="is not gzip-compressed"):
        inspect_artifact(plain)
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(write_tarball(tmp_path / "whole.tar.gz", "fp32").read_bytes()[:60])
    with pytest.raises(TargetError, match=r"is not a readable model\.tar\.gz"):
        inspect_artifact(truncated)
    with pytest.raises(TargetError, match="is not a file"):
        inspect_artifact(tmp_path)


def test_an_invalid_manifest_is_reported_with_its_location(tmp_path: Path) -> None:
    import io
    import tarfile

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = b'{"variant": "fp64"}'
        info = tarfile.TarInfo("./manifest.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "model.tar.gz"
    path.write_bytes(gzip.compress(raw.getvalue()))
    with pytest.raises(TargetError, match=r"model.tar.gz!manifest.json is invalid at"):
        inspect_artifact(path)
