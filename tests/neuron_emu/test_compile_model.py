"""compile_model: one artifact for any head (classification, sentence embedding, token classification), serving every
bucket with dynamic batching and answering like neuron_emu.trace of the model at the request's shape."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import neuron_emu
from neuron_emu.errors import ArtifactError
from neuron_emu.qa import MODEL_FILE, PLAN_FILE
from neuron_emu.runtime import describe, load
from tests.neuron_emu.parallel.conftest import autocast_tolerance, head_case, make_inputs, outputs_of

# (case, output_seq_dims, the shape of one output row for a sequence length)
CASES: list[tuple[str, list[int | None], Callable[[int], tuple[int, ...]]]] = [
    ("bert-sequence-classification", [None], lambda length: (3,)),
    ("sentence-embedding", [None], lambda length: (32,)),
    ("distilbert-token-classification", [1], lambda length: (length, 2)),
]


@pytest.mark.parametrize(("name", "seq_dims", "row"), CASES, ids=[c[0] for c in CASES])
def test_compiled_models_serve_every_bucket_with_dynamic_batching(
    name: str, seq_dims: list[int | None], row: Callable[[int], tuple[int, ...]], tmp_path: Path
) -> None:
    case = head_case(name)
    count = len(case.inputs)
    artifact = neuron_emu.compile_model(
        case.model, [16, 32], 2, None, tmp_path, output_seq_dims=seq_dims, num_inputs=count
    )
    assert artifact.files == (MODEL_FILE, PLAN_FILE) and artifact.buckets == (16, 32)
    assert artifact.plans[32].totals["flops"] > artifact.plans[16].totals["flops"] > 0
    served = load(tmp_path / MODEL_FILE)
    info = describe(served)
    assert info["buckets"] == [16, 32] and info["dynamic_batch"] and info["batch_size"] == 2
    # Exactly a bucket, between buckets (padded to 32), batch 3 (not the traced 2: dynamic batching).
    for length in (16, 20, 32):
        inputs = make_inputs(3, length, seed=length)[:count]
        got = outputs_of(served(*inputs))
        reference = outputs_of(neuron_emu.trace(case.model, inputs)(*inputs))
        with torch.no_grad():
            cpu = outputs_of(case.model(*inputs))
        for g, ref, fp32 in zip(got, reference, cpu, strict=True):
            assert g.shape == ref.shape == (3, *row(length))
            assert float((g - ref).abs().max()) <= autocast_tolerance(ref, fp32)


def test_the_sequence_dimensions_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    classifier = head_case("bert-sequence-classification").model
    # Logits [batch, 3]: dimension 1 is not the sequence.
    with pytest.raises(ArtifactError, match="its dimension 1 is not the sequence"):
        neuron_emu.compile_model(classifier, [16, 32], 2, None, tmp_path, output_seq_dims=[1])
    with pytest.raises(ArtifactError, match="output_seq_dims has 2 entries for the model's 1 outputs"):
        neuron_emu.compile_model(classifier, [16], 2, None, tmp_path, output_seq_dims=[None, None])
    # Token logits [batch, seq, labels] without their sequence dimension would come back padded to the bucket.
    tagger = head_case("distilbert-token-classification").model
    with pytest.raises(ArtifactError, match="output 0 changes shape with the sequence bucket"):
        neuron_emu.compile_model(tagger, [16, 32], 2, None, tmp_path, num_inputs=2)

    class Transposed(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            logits: torch.Tensor = self.inner(*inputs)[0]
            return logits.t().contiguous()

    with pytest.raises(ArtifactError, match="batch dimension \\(2\\) first"):
        neuron_emu.compile_model(Transposed(classifier).eval(), [16], 2, None, tmp_path)
    with pytest.raises(ArtifactError, match="num_inputs"):
        neuron_emu.compile_model(classifier, [16], 2, None, tmp_path, num_inputs=1)
    assert not any(tmp_path.iterdir())
