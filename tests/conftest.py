"""Shared fixtures: a tiny random BERT QA model folder and servable model directories built from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _stop_leftover_servers() -> Iterator[None]:
    """A test that fails half-way must not leave a serving process behind."""
    yield
    from tests.container.server_process import STARTED

    for server in STARTED:
        if server.process.poll() is None:
            server.stop(timeout=10)


def minilm_tokenizer_path() -> Path:
    from sagebox.pipeline.demo_models import minilm_source_dir

    return minilm_source_dir() / "tokenizer.json"


def make_tiny_hf_folder(path: Path, seed: int = 0) -> Path:
    """A Hugging Face folder: tiny random BertForQuestionAnswering + a real uncased WordPiece tokenizer."""
    from sagebox.pipeline.demo_models import TINY, make_random_bert_folder

    info = {"name": "tiny-random-bert", "license": "none: random weights"}
    return make_random_bert_folder(path, TINY, info, seed=seed)


@pytest.fixture(scope="session")
def tiny_hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_hf_folder(tmp_path_factory.mktemp("hf") / "tiny-bert")


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 TorchScript model directory (manifest.json, model.pt, tokenizer.json)."""
    from sagebox.pipeline.servable import build_fp32

    out = tmp_path_factory.mktemp("models") / "tiny-torchscript"
    build_fp32(tiny_hf_folder, out, runtime="torchscript")
    return out


@pytest.fixture(scope="session")
def tiny_onnx_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 ONNX Runtime model directory."""
    from sagebox.pipeline.servable import build_fp32

    out = tmp_path_factory.mktemp("models") / "tiny-onnx"
    build_fp32(tiny_hf_folder, out, runtime="onnxruntime")
    return out
