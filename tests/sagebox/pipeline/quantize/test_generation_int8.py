"""The INT8 text-generation directory is written atomically: a check that raises on the staged directory leaves no
INT8 directory (and an older one untouched), and only an FP32 text-generation directory is quantized."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.manifest import Manifest, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.export.generation import build_generation
from sagebox.pipeline.quantize.generation import build_generation_int8
from tests.causal_models import causal_folder


@pytest.fixture(scope="module")
def fp32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("int8-generation")
    build_generation(causal_folder(root / "hf-gpt2", "gpt2", chat_template=None), root / "fp32")
    return root / "fp32"


def _refuse(staging: Path, manifest: Manifest) -> None:
    assert load_verified(staging) == manifest  # the check sees the whole staged directory
    raise SageboxError("refused")


def test_a_failed_check_leaves_no_int8_directory_and_an_older_one_untouched(fp32_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="refused"):
        build_generation_int8(fp32_dir, tmp_path / "int8", check=_refuse)
    assert list(tmp_path.iterdir()) == []  # no staging folder left either
    older = build_generation_int8(fp32_dir, tmp_path / "int8")
    assert older.variant == "int8" and older.generation is not None and older.generation.chat_template is None
    with pytest.raises(SageboxError, match="refused"):
        build_generation_int8(fp32_dir, tmp_path / "int8", check=_refuse)
    assert load_verified(tmp_path / "int8") == older and [p.name for p in tmp_path.iterdir()] == ["int8"]


def test_only_an_fp32_text_generation_directory_is_quantized(fp32_dir: Path, tmp_path: Path) -> None:
    build_generation_int8(fp32_dir, tmp_path / "int8")
    with pytest.raises(SageboxError, match="quantized from the FP32 text-generation directory"):
        build_generation_int8(tmp_path / "int8", tmp_path / "again")
    assert not (tmp_path / "again").exists()
