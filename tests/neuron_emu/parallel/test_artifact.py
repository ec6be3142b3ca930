"""Saved models of any head: the manifest's output shapes and kind, the round trip, and format-1 (QA) directories."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import neuron_emu
from neuron_emu import parallel
from neuron_emu.errors import ArtifactError
from neuron_emu.parallel.artifact import FORMAT, FORMAT_V1, MANIFEST_FILE, Manifest, script_shard, write_artifact
from neuron_emu.parallel.encoder import encoder_parts
from neuron_emu.parallel.group import ForkServer
from neuron_emu.parallel.module import ParallelModel
from neuron_emu.parallel.shard import Finish, HeadSegment, rank_segments, run_stepwise
from tests.neuron_emu.conftest import QAWrapper
from tests.neuron_emu.parallel.conftest import Inputs, autocast_tolerance, head_case, make_inputs


@pytest.fixture(scope="module")
def classifier_tp2(fork_server: ForkServer) -> Iterator[ParallelModel]:
    """The classification case's model as Hugging Face returns it by default (a ModelOutput), sharded over 2."""
    case = head_case("bert-sequence-classification", return_dict=True)
    model = parallel.trace(case.model, case.inputs, tp_degree=2)
    yield model
    model.close()


def test_a_saved_classifier_round_trips_and_answers_the_same(
    classifier_tp2: ParallelModel, tmp_path: Path, fork_server: ForkServer
) -> None:
    case = head_case("bert-sequence-classification", return_dict=True)
    twin = head_case("bert-sequence-classification")  # the same weights, returning a tuple
    traced_single = neuron_emu.trace(twin.model, twin.inputs)
    expected = classifier_tp2(*case.inputs)
    # A ModelOutput's tensors come back as a tuple: (logits,), what neuron_emu.trace of its tuple twin returns.
    reference = traced_single(*case.inputs)
    assert isinstance(expected, tuple) and type(expected) is type(reference) and len(expected) == 1
    with torch.no_grad():
        cpu = twin.model(*twin.inputs)[0]
    assert float((expected[0] - reference[0]).abs().max()) <= autocast_tolerance(reference[0], cpu)

    directory = classifier_tp2.save(tmp_path / "classifier")
    written = json.loads((directory / MANIFEST_FILE).read_text())
    assert written["format"] == FORMAT
    assert (written["output_kind"], written["output_shapes"]) == ("tuple", [[2, 3]])
    assert written["model"]["model_class"] == "BertForSequenceClassification"
    with parallel.load(directory) as loaded:
        got = loaded(*case.inputs)
        assert isinstance(got, tuple) and torch.equal(got[0], expected[0])
        loaded.dynamic_batch()
        ids, mask, types = make_inputs(3, 16, seed=13)
        (logits,) = loaded(ids, mask, types)
        assert logits.shape == (3, 3)
        (head,) = loaded(ids[:2], mask[:2], types[:2])
        assert torch.equal(logits[:2], head)


def test_a_model_returning_a_tensor_returns_one_after_a_round_trip(tmp_path: Path, fork_server: ForkServer) -> None:
    case = head_case("sentence-embedding")
    with parallel.trace(case.model, case.inputs, tp_degree=2) as model:
        expected = model(*case.inputs)
        directory = model.save(tmp_path / "embedder")
    assert isinstance(expected, torch.Tensor) and expected.shape == (2, 32)
    assert json.loads((directory / MANIFEST_FILE).read_text())["output_kind"] == "tensor"
    with parallel.load(directory) as loaded:
        got = loaded(*case.inputs)
    assert isinstance(got, torch.Tensor) and torch.equal(got, expected)


class LegacyHead(nn.Module):
    """Format 1's last segment: (hidden, mask bias, reduced) -> (start_logits, end_logits), no model inputs."""

    def __init__(self, finish: Finish, qa_outputs: nn.Linear) -> None:
        super().__init__()
        self.finish = finish
        self.qa_outputs = qa_outputs

    def forward(self, residual: torch.Tensor, bias: torch.Tensor, reduced: torch.Tensor) -> tuple[torch.Tensor, ...]:
        start, end = self.qa_outputs(self.finish(reduced, residual)).split(1, dim=-1)
        return start.squeeze(-1).contiguous(), end.squeeze(-1).contiguous()


def _format_1_directory(tiny_qa: QAWrapper, qa_inputs: Inputs, plan_json: str, directory: Path) -> Path:
    """A tp-2 directory as the QA-only neuron_emu.parallel wrote it (format 1)."""
    parts = encoder_parts(tiny_qa)
    qa_outputs = tiny_qa.model.get_submodule("qa_outputs")
    assert isinstance(qa_outputs, nn.Linear)
    per_rank = [rank_segments(parts, 2, rank) for rank in range(2)]
    with torch.no_grad():
        examples, _ = run_stepwise(per_rank, qa_inputs)
    shards = []
    for rank, segments in enumerate(per_rank):
        last = segments[-1]
        assert isinstance(last, HeadSegment)
        legacy = [*segments[:-1], LegacyHead(last.finish, qa_outputs).eval()]
        legacy_examples = [*examples[:-1], examples[-1][:3]]
        traced = [neuron_emu.trace(s, e) for s, e in zip(legacy, legacy_examples, strict=True)]
        shards.append(script_shard(traced, rank, 2))
    manifest = Manifest(
        tp_degree=2,
        segments=len(per_rank[0]),
        input_shapes=[list(x.shape) for x in qa_inputs],
        input_dtypes=["int64"] * 3,
        output_shapes=[[2, 16], [2, 16]],
        compiler_args="--auto-cast matmult --auto-cast-type bf16 -O2",
        auto_cast="matmult",
        auto_cast_type="bf16",
        model=parts.describe(),
        format=FORMAT_V1,
    )
    write_artifact(directory, manifest, shards, plan_json)
    return directory


def test_a_format_1_qa_directory_still_loads_and_answers(
    tiny_qa: QAWrapper,
    qa_inputs: Inputs,
    sharded: Callable[[int], ParallelModel],
    single_core: torch.jit.ScriptModule,
    tmp_path: Path,
) -> None:
    current = sharded(2)
    directory = _format_1_directory(tiny_qa, qa_inputs, current.plan.to_json(), tmp_path / "v1")
    raw = json.loads((directory / MANIFEST_FILE).read_text())
    assert raw["format"] == FORMAT_V1 and "output_kind" not in raw  # as format 1 wrote it
    with parallel.load(directory) as old:
        assert not old.manifest.head_takes_inputs
        start, end = old(*qa_inputs)
        old.dynamic_batch()
        again = json.loads((directory / MANIFEST_FILE).read_text())
        assert again["format"] == FORMAT_V1 and again["dynamic_batch"] is True and "output_kind" not in again
        ids, mask, types = make_inputs(3, 16, seed=2)
        three = old(ids, mask, types)
        assert [tuple(t.shape) for t in three] == [(3, 16), (3, 16)]
    with torch.no_grad():
        cpu = tiny_qa(*qa_inputs)
    for got, new, ref, fp32 in zip((start, end), current(*qa_inputs), single_core(*qa_inputs), cpu, strict=True):
        assert float((got - new).abs().max()) <= autocast_tolerance(ref, fp32)


def test_unknown_formats_and_outputs_it_cannot_batch_are_refused_in_one_line(
    classifier_tp2: ParallelModel, tmp_path: Path
) -> None:
    directory = classifier_tp2.save(tmp_path / "model")
    raw = json.loads((directory / MANIFEST_FILE).read_text())
    (directory / MANIFEST_FILE).write_text(json.dumps({**raw, "format": "neuron_emu.parallel/9"}))
    with pytest.raises(ArtifactError, match=r"reads 'neuron_emu\.parallel/2' or 'neuron_emu\.parallel/1'") as failure:
        parallel.load(directory)
    assert "\n" not in str(failure.value)
    scalar = Manifest(**{**classifier_tp2.manifest.to_dict(), "output_shapes": [[]], "output_kind": "tensor"})
    model = ParallelModel(scalar, classifier_tp2.plan, directory=directory)
    with pytest.raises(ArtifactError, match="batch dimension first") as failure:
        model.dynamic_batch()
    assert "\n" not in str(failure.value)
