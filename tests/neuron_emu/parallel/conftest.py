"""Fixtures: seeded QA inputs, the single-core traced tiny BERT, and its sharded versions (traced once per degree);
tiny models with other heads (classification, sentence embedding, token classification) and a warm fork server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import neuron_emu
from neuron_emu import parallel
from neuron_emu.parallel.group import ForkServer
from neuron_emu.parallel.module import ParallelModel
from tests.neuron_emu.conftest import QAWrapper, SentenceEmbedder, tiny_bert_config

Inputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
# The auto-cast tolerance: a sharded model adds its fp32 partial sums in another order than the single-core graph
# (so does a different thread count), which flips some roundings of downstream operands to the cast type; the two
# traced models then differ by about as much as either differs from the fp32 CPU model, never by more than both
# errors together. The floor covers `--auto-cast none`, where both equal the CPU model up to fp32 summation order.
FP32_FLOOR = 1e-5


def autocast_tolerance(single_core: torch.Tensor, cpu_fp32: torch.Tensor) -> float:
    """How far a sharded output may be from the single-core traced output `single_core`."""
    cast_error = float((single_core - cpu_fp32).abs().max())
    return 2.0 * cast_error + FP32_FLOOR * max(1.0, float(cpu_fp32.abs().max()))


def outputs_of(out: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """A traced or sharded model's outputs as a tuple (a single Tensor as a 1-tuple)."""
    return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def make_inputs(batch: int, length: int, seed: int) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 1000, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[-1, length * 2 // 3 :] = 0  # the last row is padded
    token_type_ids = torch.zeros(batch, length, dtype=torch.long)
    token_type_ids[:, length // 2 :] = 1
    return input_ids, attention_mask, token_type_ids


@pytest.fixture(scope="session")
def qa_inputs() -> Inputs:
    return make_inputs(2, 16, seed=7)


@pytest.fixture(scope="session")
def single_core(tiny_qa: QAWrapper, qa_inputs: Inputs) -> torch.jit.ScriptModule:
    return neuron_emu.trace(tiny_qa, qa_inputs)


@pytest.fixture(scope="session")
def sharded(tiny_qa: QAWrapper, qa_inputs: Inputs) -> Iterator[Callable[[int], ParallelModel]]:
    """tp_degree -> the tiny QA model traced at that degree (default compiler args), closed after the session."""
    made: dict[int, ParallelModel] = {}

    def get(degree: int) -> ParallelModel:
        if degree not in made:
            made[degree] = parallel.trace(tiny_qa, qa_inputs, tp_degree=degree)
        return made[degree]

    yield get
    for model in made.values():
        model.close()


@pytest.fixture(scope="session")
def saved_tp2(sharded: Callable[[int], ParallelModel], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sharded(2).save(tmp_path_factory.mktemp("tp2") / "model")


# Small enough to trace in about a second per degree: hidden 32, 2 layers, 4 heads, intermediate 64.
SMALL = {"hidden_size": 32, "intermediate_size": 64}


@dataclass(frozen=True)
class HeadCase:
    """A model with some head other than QA, and inputs (padded in the last row) to call it with."""

    name: str
    model: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]


def head_case(name: str, *, return_dict: bool = False) -> HeadCase:
    """One of HEAD_CASES, with seeded weights (the same for every call); Hugging Face models return tuples unless
    `return_dict` (neuron_emu.trace, the single-core reference, takes tuples only)."""
    from transformers import (
        BertForSequenceClassification,
        BertModel,
        DistilBertConfig,
        DistilBertForTokenClassification,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    torch.manual_seed(11)
    inputs: tuple[torch.Tensor, ...] = make_inputs(2, 16, seed=7)
    model: torch.nn.Module
    config: Any
    if name == "bert-sequence-classification":
        config = tiny_bert_config(num_labels=3, return_dict=return_dict, **SMALL)
        model = BertForSequenceClassification(config)
    elif name == "sentence-embedding":
        model = SentenceEmbedder(BertModel(tiny_bert_config(**SMALL), add_pooling_layer=False))
    elif name == "distilbert-token-classification":
        config = DistilBertConfig(
            vocab_size=1000, dim=32, n_layers=2, n_heads=4, hidden_dim=64, return_dict=return_dict
        )
        model = DistilBertForTokenClassification(config)
        inputs = inputs[:2]  # DistilBERT takes no token types: its third positional argument is inputs_embeds
    elif name == "roberta-sequence-classification":
        sizes: dict[str, Any] = {"vocab_size": 1000, "num_hidden_layers": 2, "num_attention_heads": 4, **SMALL}
        config = RobertaConfig(max_position_embeddings=40, type_vocab_size=1, return_dict=return_dict, **sizes)
        model = RobertaForSequenceClassification(config)
        inputs = (inputs[0], inputs[1], torch.zeros_like(inputs[2]))  # RoBERTa has one token type
    else:
        raise KeyError(name)
    return HeadCase(name, model.eval(), inputs)


HEAD_CASES = (
    "bert-sequence-classification",
    "sentence-embedding",
    "distilbert-token-classification",
    "roberta-sequence-classification",
)


@pytest.fixture(scope="module")
def fork_server() -> Iterator[ForkServer]:
    """Hold the shared fork server for a module, so that models traced and closed one by one fork their workers
    from one warm server instead of each starting (and importing torch in) a new one."""
    server = ForkServer.acquire()
    yield server
    server.release()
