"""Sharded outputs against the single-core traced model and the CPU model."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

import neuron_emu
from neuron_emu import parallel
from neuron_emu.compiler_args import parse_compiler_args
from neuron_emu.parallel.encoder import encoder_parts
from neuron_emu.parallel.module import ParallelModel
from neuron_emu.parallel.shard import rank_segments, run_in_process, weight_split
from tests.neuron_emu.conftest import QAWrapper, tiny_bert_config
from tests.neuron_emu.parallel.conftest import FP32_FLOOR, Inputs, autocast_tolerance, make_inputs


@pytest.mark.parametrize("degree", [1, 2, 4])
def test_eager_shards_sum_to_the_cpu_model(tiny_qa: QAWrapper, qa_inputs: Inputs, degree: int) -> None:
    """Before any tracing: the column/row split with summed partials is the same function in fp32."""
    parts = encoder_parts(tiny_qa)
    with torch.no_grad():
        expected = tiny_qa(*qa_inputs)
        got = run_in_process([rank_segments(parts, degree, rank) for rank in range(degree)], qa_inputs)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["roberta", "electra"])
def test_other_bert_layout_encoders_shard_exactly_too(family: str, qa_inputs: Inputs) -> None:
    from transformers import (
        ElectraConfig,
        ElectraForQuestionAnswering,
        RobertaConfig,
        RobertaForQuestionAnswering,
    )

    sizes: dict[str, Any] = {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
    sizes.update(intermediate_size=128, max_position_embeddings=40)
    torch.manual_seed(5)
    model = (
        RobertaForQuestionAnswering(RobertaConfig(**sizes))
        if family == "roberta"
        else ElectraForQuestionAnswering(ElectraConfig(embedding_size=32, **sizes))  # with embeddings_project
    ).eval()
    ids, mask, types = qa_inputs
    parts = encoder_parts(model)
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
        start, end = run_in_process([rank_segments(parts, 4, rank) for rank in range(4)], qa_inputs)
    torch.testing.assert_close(start, expected.start_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(end, expected.end_logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("degree", [1, 2, 4])
def test_sharded_equals_single_core_within_autocast_tolerance(
    sharded: Callable[[int], ParallelModel],
    single_core: torch.jit.ScriptModule,
    tiny_qa: QAWrapper,
    qa_inputs: Inputs,
    degree: int,
) -> None:
    model = sharded(degree)
    outputs = model(*qa_inputs)
    references = single_core(*qa_inputs)
    with torch.no_grad():
        cpu = tiny_qa(*qa_inputs)
    for got, ref, fp32 in zip(outputs, references, cpu, strict=True):
        assert got.shape == ref.shape == (2, 16)
        assert float((got - ref).abs().max()) <= autocast_tolerance(ref, fp32)
    # N real workers, one process per rank, none of them this process.
    pids = model.worker_pids
    assert len(set(pids)) == degree and os.getpid() not in pids
    assert all(os.path.exists(f"/proc/{pid}") for pid in pids)
    timings = model.last_timing["chunks"][0]
    assert len(timings) == degree
    assert all(t["collective_us"] == 0.0 for t in timings) == (degree == 1)


def test_weights_are_counted_once_and_auto_cast_halves_the_sharded_ones(tiny_qa: QAWrapper) -> None:
    parts = encoder_parts(tiny_qa)
    fp32 = weight_split(parts, parse_compiler_args("--auto-cast none"))
    assert fp32.replicated_bytes + fp32.sharded_bytes == 4 * sum(p.numel() for p in tiny_qa.parameters())
    bf16 = weight_split(parts, parse_compiler_args("--auto-cast matmult --auto-cast-type bf16"))
    assert bf16.sharded_bytes * 2 == fp32.sharded_bytes  # every sharded weight is a matmul operand
    assert fp32.per_core(4) < fp32.per_core(2) < fp32.per_core(1)


@pytest.mark.slow
def test_tp8_on_an_8_head_model_equals_single_core() -> None:
    from transformers import BertForQuestionAnswering

    torch.manual_seed(3)
    model = QAWrapper(BertForQuestionAnswering(tiny_bert_config(num_attention_heads=8))).eval()
    inputs = make_inputs(1, 16, seed=11)
    reference = neuron_emu.trace(model, inputs)(*inputs)
    with torch.no_grad():
        cpu = model(*inputs)
    with parallel.trace(model, inputs, tp_degree=8) as sharded_model:
        outputs = sharded_model(*inputs)
        assert len(sharded_model.worker_pids) == 8
    for got, ref, fp32 in zip(outputs, reference, cpu, strict=True):
        assert float((got - ref).abs().max()) <= autocast_tolerance(ref, fp32)


@pytest.mark.slow
def test_without_auto_cast_the_sharded_model_equals_the_cpu_model(tiny_qa: QAWrapper, qa_inputs: Inputs) -> None:
    with torch.no_grad():
        expected = tiny_qa(*qa_inputs)
    with parallel.trace(tiny_qa, qa_inputs, tp_degree=2, compiler_args="--auto-cast none") as model:
        got = model(*qa_inputs)
    for g, e in zip(got, expected, strict=True):
        assert float((g - e).abs().max()) <= FP32_FLOOR * max(1.0, float(e.abs().max()))
