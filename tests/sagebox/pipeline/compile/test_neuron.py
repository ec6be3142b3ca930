"""`build_neuron`: a servable Neuron model directory from a HF folder, answering like the CPU model."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import torch

from container.manifest import load_verified
from container.predictor import Predictor
from neuron_emu.qa import DEFAULT_QA_COMPILER_ARGS
from sagebox.cli.app import main
from sagebox.errors import SageboxError
from sagebox.pipeline.compile.neuron import NEURON_DLC, NEURONX_MISSING, build_neuron
from tests.container.handlers.standin_torch_neuronx import (
    StandinTorchNeuronx,
    standin_torch_neuronx,
    without_torch_neuronx,
)

__all__ = ["standin_torch_neuronx", "without_torch_neuronx"]  # fixtures


@pytest.mark.slow
def test_neuron_model_dir_serves_the_same_answers_as_fp32(
    tiny_hf_folder: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "neuron"
    manifest = build_neuron(tiny_hf_folder, out)
    assert manifest.variant == "neuron" and manifest.runtime == "neuron"
    assert manifest.compile is not None and manifest.compile.auto_cast == "matmult"
    assert "neuron_cost_plan.json" in manifest.files
    assert load_verified(out) == manifest
    neuron = Predictor.load(out)
    fp32 = Predictor.load(tiny_model_dir)
    pairs = [
        ("Which basin?", "The Amazon rainforest covers most of the Amazon basin of South America."),
        ("Who met Bob?", "Alice met Bob in Paris."),
    ]
    for (_question, context), a, b in zip(pairs, neuron.answer_many(pairs), fp32.answer_many(pairs), strict=True):
        assert context[a.start : a.end] == a.text
        assert a.score == pytest.approx(b.score, abs=0.05)  # bf16 matmuls move probabilities a little


def test_bad_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="does not exist"):
        build_neuron(tmp_path / "missing", tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- the torch_neuronx backend, through a STAND-IN torch_neuronx (tests/container/handlers/standin_torch_neuronx.py):
# these tests prove what Sagebox passes to torch_neuronx and what it writes, not what neuronx-cc or a NeuronCore do.


def test_torch_neuronx_missing_is_one_line_naming_where_to_run_it(
    tiny_hf_folder: Path, tmp_path: Path, without_torch_neuronx: None, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SageboxError) as caught:
        build_neuron(tiny_hf_folder, tmp_path / "out", backend="torch_neuronx")
    assert str(caught.value) == NEURONX_MISSING
    assert NEURON_DLC in NEURONX_MISSING and "on an inf2/trn1 instance" in NEURONX_MISSING
    assert not (tmp_path / "out").exists()
    code = main(
        ["compile", "--model", str(tiny_hf_folder), "--out", str(tmp_path / "out"), "--backend", "torch-neuronx"]
    )
    err = capsys.readouterr().err
    assert code == 1 and err == f"sagebox: error: {NEURONX_MISSING}\n"


def test_torch_neuronx_traces_every_bucket_like_the_emulator(
    tiny_hf_folder: Path, tiny_model_dir: Path, tmp_path: Path, standin_torch_neuronx: StandinTorchNeuronx
) -> None:
    out = tmp_path / "neuronx"
    manifest = build_neuron(tiny_hf_folder, out, batch_size=2, backend="torch_neuronx")
    buckets = manifest.sequence_buckets
    # The same buckets, example shapes and auto-cast arguments neuron_emu.compile_qa uses, passed to neuronx-cc.
    assert [call.shapes for call in standin_torch_neuronx.trace_calls] == [((2, b),) * 3 for b in buckets]
    assert all(call.dtypes == (torch.long,) * 3 for call in standin_torch_neuronx.trace_calls)
    assert {tuple(call.compiler_args or ()) for call in standin_torch_neuronx.trace_calls} == {
        tuple(shlex.split(DEFAULT_QA_COMPILER_ARGS))
    }
    assert len(standin_torch_neuronx.dynamic_batch_calls) == len(buckets)
    assert manifest.compile is not None and manifest.compile.backend == "torch_neuronx"
    assert manifest.compile.compiler == "torch-neuronx 0.0.0+standin (neuronx-cc)"
    assert (manifest.compile.auto_cast, manifest.compile.auto_cast_type) == ("matmult", "bf16")
    graphs = [f"model.neuronx.seq{b}.pt" for b in buckets]
    assert manifest.model_file == graphs[0]
    assert sorted(manifest.files) == sorted([*graphs, "tokenizer.json"])  # no emulator cost plan
    assert load_verified(out) == manifest
    # Served by the neuron handler (torch_neuronx imported: the stand-in), answering like the FP32 model.
    neuron, fp32 = Predictor.load(out), Predictor.load(tiny_model_dir)
    pairs = [("Who met Bob?", "Alice met Bob in Paris."), ("Which city?", "Alice met Bob in Paris.")]
    for a, b in zip(neuron.answer_many(pairs), fp32.answer_many(pairs), strict=True):
        assert (a.text, a.start) == (b.text, b.start) and a.score == pytest.approx(b.score, abs=1e-4)


def test_torch_neuronx_gets_the_compiler_arguments_as_given(
    tiny_hf_folder: Path, tmp_path: Path, standin_torch_neuronx: StandinTorchNeuronx
) -> None:
    args = "--auto-cast all --auto-cast-type fp16 --target trn1 --enable-fast-loading-neuron-binaries --new-flag x"
    manifest = build_neuron(tiny_hf_folder, tmp_path / "out", compiler_args=args, backend="torch_neuronx")
    assert standin_torch_neuronx.trace_calls[0].compiler_args == shlex.split(args)  # unknown flags reach neuronx-cc
    assert manifest.compile is not None
    assert (manifest.compile.auto_cast, manifest.compile.auto_cast_type) == ("all", "fp16")
    assert manifest.compile.target_instances and all("trn1" in t for t in manifest.compile.target_instances)
    with pytest.raises(SageboxError, match=r"--compiler-args: --auto-cast 'some' is not one of"):
        build_neuron(tiny_hf_folder, tmp_path / "bad", compiler_args="--auto-cast some", backend="torch_neuronx")


def test_a_torch_neuronx_compiler_error_is_one_line_and_writes_nothing(
    tiny_hf_folder: Path, tmp_path: Path, standin_torch_neuronx: StandinTorchNeuronx
) -> None:
    standin_torch_neuronx.fail_trace = "ERROR: unsupported operator aten::foo"
    with pytest.raises(SageboxError) as caught:
        build_neuron(tiny_hf_folder, tmp_path / "out", backend="torch_neuronx")
    assert str(caught.value) == (
        "torch-neuronx compilation of sequence bucket 64 failed: ERROR: unsupported operator aten::foo"
    )
    assert not (tmp_path / "out").exists()
