"""Fixtures: seeded QA inputs, the single-core traced tiny BERT, and its sharded versions (traced once per degree)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import neuron_emu
from neuron_emu import parallel
from neuron_emu.parallel.module import ParallelModel
from tests.neuron_emu.conftest import QAWrapper

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
