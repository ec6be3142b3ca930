"""Shared fixtures: the test custom-op libraries (built once, cached across sessions) and tiny BERTs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from neuron_emu import custom_op
from neuron_emu.custom_op import LoadedLibrary

if TYPE_CHECKING:
    from transformers import BertConfig

REPO = Path(__file__).resolve().parents[2]
CPP = Path(__file__).resolve().parent / "custom_op" / "cpp"


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run `code` in a fresh interpreter (a new process, as a deployment would) and return its stdout."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or REPO,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout


@pytest.fixture(scope="session")
def test_ops() -> LoadedLibrary:
    path = custom_op.load("nemu_test", [CPP / "kernels.cpp"], [CPP / "shapes.cpp"])
    return custom_op.load_library(path)


@pytest.fixture(scope="session")
def multicore_ops() -> LoadedLibrary:
    path = custom_op.load("nemu_multicore", [CPP / "multicore.cpp"], [CPP / "multicore_shapes.cpp"], multicore=True)
    return custom_op.load_library(path)


@pytest.fixture(scope="session")
def relu_styles() -> LoadedLibrary:
    """`nemu_relu`: one ReLU written with element accessors, TCM transfers and streams (single core)."""
    path = custom_op.load("nemu_relu", [CPP / "relu_styles.cpp"], [CPP / "relu_styles_shapes.cpp"])
    return custom_op.load_library(path)


class QAWrapper(torch.nn.Module):
    """The contract of Sagebox QA graphs: (input_ids, attention_mask, token_type_ids) -> (start, end)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.start_logits, out.end_logits


class ClassifierWrapper(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        return logits


class SentenceEmbedder(torch.nn.Module):
    """A sentence-embedding wrapper keeping its encoder as `.backbone`: the mean of the last hidden state over the
    attended tokens, L2-normalised (with rsqrt: NeuronCores have no lowering for torch.linalg norms)."""

    def __init__(self, backbone: torch.nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        weights = attention_mask.unsqueeze(-1).to(out.last_hidden_state.dtype)
        pooled = (out.last_hidden_state * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        embedding: torch.Tensor = pooled * torch.rsqrt((pooled * pooled).sum(-1, keepdim=True).clamp(min=1e-12))
        return embedding


def tiny_bert_config(**overrides: int) -> BertConfig:
    from transformers import BertConfig

    settings: dict[str, Any] = {
        "vocab_size": 1000,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 128,
    }
    settings.update(overrides)
    return BertConfig(**settings)


@pytest.fixture(scope="session")
def tiny_qa() -> QAWrapper:
    from transformers import BertForQuestionAnswering

    torch.manual_seed(0)
    return QAWrapper(BertForQuestionAnswering(tiny_bert_config())).eval()


@pytest.fixture(scope="session")
def bert_classifier() -> ClassifierWrapper:
    """A BERT classifier with real-sized hidden layers (random weights), for auto-cast error bounds."""
    from transformers import BertForSequenceClassification

    torch.manual_seed(1)
    config = tiny_bert_config(hidden_size=256, num_hidden_layers=4, intermediate_size=1024, num_labels=2)
    return ClassifierWrapper(BertForSequenceClassification(config)).eval()
