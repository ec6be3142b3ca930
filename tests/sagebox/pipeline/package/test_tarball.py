from __future__ import annotations

import gzip
import os
import shutil
import struct
import tarfile
from pathlib import Path

import pytest

from container.manifest import MANIFEST_NAME, ManifestError
from sagebox.errors import SageboxError
from sagebox.pipeline.package import tarball as package_module
from sagebox.pipeline.package.tarball import package_model_dir, unpack_and_verify


@pytest.fixture
def model_copy(tiny_onnx_model_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(tiny_onnx_model_dir, tmp_path / "model"))


def test_same_inputs_same_bytes_whatever_the_file_metadata(model_copy: Path, tmp_path: Path) -> None:
    first = package_model_dir(model_copy, tmp_path / "a" / "model.tar.gz")
    # Same content, different mtimes, permissions and location: the archive must not change.
    moved = Path(shutil.copytree(model_copy, tmp_path / "elsewhere" / "other-name"))
    for path in moved.iterdir():
        os.utime(path, (1_700_000_000, 1_700_000_000))
        path.chmod(0o600)
    second = package_model_dir(moved, tmp_path / "b" / "model.tar.gz")
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256
    assert first.bytes == first.path.stat().st_size


def test_archive_layout_is_canonical(model_copy: Path, tmp_path: Path) -> None:
    result = package_model_dir(model_copy, tmp_path / "model.tar.gz")
    raw = result.path.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert struct.unpack("<I", raw[4:8])[0] == 0  # gzip header mtime
    assert raw[3] & 0x08 == 0  # no file name stored in the gzip header
    with tarfile.open(result.path, "r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == sorted([MANIFEST_NAME, "model.onnx", "tokenizer.json"])
        for m in members:
            assert (m.mtime, m.uid, m.gid, m.uname, m.gname, m.mode) == (0, 0, 0, "", "", 0o644)
            assert m.pax_headers == {}
    with gzip.open(result.path) as fh:
        assert b"PaxHeader" not in fh.read()


def test_only_listed_files_go_in_and_untar_verifies(model_copy: Path, tmp_path: Path) -> None:
    (model_copy / "notes.txt").write_text("not in the manifest")
    result = package_model_dir(model_copy, tmp_path / "model.tar.gz")
    assert result.skipped == ("notes.txt",)
    assert "notes.txt" not in result.members
    manifest = unpack_and_verify(result.path, tmp_path / "opt-ml-model")
    assert manifest == result.manifest
    assert not (tmp_path / "opt-ml-model" / "notes.txt").exists()


def test_nested_files_get_directory_entries(model_copy: Path, tmp_path: Path) -> None:
    from container.manifest import load_verified
    from sagebox.pipeline.export.artifact import write_manifest

    manifest = load_verified(model_copy)
    (model_copy / "extra" / "deep").mkdir(parents=True)
    (model_copy / "extra" / "deep" / "vocab.txt").write_text("[PAD]\n")
    write_manifest(
        model_copy,
        variant=manifest.variant,
        runtime=manifest.runtime,
        model_file=manifest.model_file,
        buckets=manifest.sequence_buckets,
        max_length=manifest.tokenizer.max_length,
        source=manifest.source,
    )
    result = package_model_dir(model_copy, tmp_path / "model.tar.gz")
    assert result.members[:2] == ("extra/", "extra/deep/")
    assert "extra/deep/vocab.txt" in result.members
    unpack_and_verify(result.path, tmp_path / "x")


def test_tampered_directory_writes_nothing(model_copy: Path, tmp_path: Path) -> None:
    (model_copy / "tokenizer.json").write_text("{}")
    with pytest.raises(ManifestError, match="tampered"):
        package_model_dir(model_copy, tmp_path / "out" / "model.tar.gz")
    assert not (tmp_path / "out" / "model.tar.gz").exists()


def test_interrupted_write_leaves_no_partial_artifact(
    model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out" / "model.tar.gz"
    package_model_dir(model_copy, out)
    previous = out.read_bytes()
    original = package_module._HashingReader.read
    calls = {"n": 0}

    def dying_read(self: object, size: int = -1) -> bytes:
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt  # e.g. Ctrl-C in the middle of the model file
        return original(self, size)  # type: ignore[arg-type]

    monkeypatch.setattr(package_module._HashingReader, "read", dying_read)
    with pytest.raises(KeyboardInterrupt):
        package_model_dir(model_copy, out)
    assert out.read_bytes() == previous  # the earlier artifact is untouched
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.tar.gz"]  # no temp file left


def test_file_changing_while_packaged_is_caught(
    model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verify = package_module.load_verified

    def verify_then_edit(model_dir: Path) -> object:
        manifest = verify(model_dir)
        with (model_dir / "tokenizer.json").open("ab") as fh:  # someone edits the file right after the check
            fh.write(b" ")
        return manifest

    monkeypatch.setattr(package_module, "load_verified", verify_then_edit)
    with pytest.raises(SageboxError, match=r"tokenizer\.json changed while it was being packaged"):
        package_model_dir(model_copy, tmp_path / "model.tar.gz")
    assert list(tmp_path.glob("*.tar.gz")) == []
    assert list(tmp_path.glob(".model.tar.gz*")) == []
