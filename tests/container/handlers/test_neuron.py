"""The serving container's neuron handler on both backends: a compile_qa artifact (neuron_emu, custom ops included)
and a torch_neuronx artifact, compiled and loaded through a STAND-IN torch_neuronx (tests/container/handlers/
standin_torch_neuronx.py: plain TorchScript on CPU; nothing here ran on Neuron hardware)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import neuron_emu
from container.handlers import HandlerError, RuntimeOptions, handler_for
from container.manifest import CompileSpec, Manifest, SourceSpec, TokenizerSpec, hash_files, load_verified
from neuron_emu.custom_op import LoadedLibrary
from sagebox.pipeline.compile.neuron import trace_neuronx
from tests.container.handlers.standin_torch_neuronx import (
    StandinTorchNeuronx,
    standin_torch_neuronx,
    without_torch_neuronx,
)
from tests.neuron_emu.conftest import QAWrapper, run_python
from tests.neuron_emu.test_qa import QAWithCustomOp

__all__ = ["standin_torch_neuronx", "without_torch_neuronx"]  # fixtures

BUCKETS = [16, 32]


def write_model_dir(model: torch.nn.Module, directory: Path) -> Manifest:
    artifact = neuron_emu.compile_qa(model, BUCKETS, 1, None, directory)
    (directory / "tokenizer.json").write_text("{}")
    manifest = Manifest(
        tool_version="0.1.0",
        variant="neuron",
        runtime="neuron",
        model_file=artifact.model_file,
        tokenizer=TokenizerSpec(max_length=64),
        sequence_buckets=BUCKETS,
        source=SourceSpec(name="tiny-bert", architecture="bert"),
        compile=CompileSpec(**artifact.compile_info().to_dict()),
        files=hash_files(directory),
    )
    (directory / "manifest.json").write_text(manifest.to_json())
    return load_verified(directory)


@pytest.fixture(scope="module")
def model_dir(tiny_qa: QAWrapper, test_ops: LoadedLibrary, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("neuron_model")
    write_model_dir(QAWithCustomOp(tiny_qa).eval(), directory)
    return directory


def features(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(batch * 100 + seq)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[0, seq // 2 :] = 0
    return {
        "input_ids": rng.integers(0, 1000, (batch, seq), dtype=np.int64),
        "attention_mask": mask,
        "token_type_ids": np.zeros((batch, seq), dtype=np.int64),
    }


def test_predict_every_batch_size_and_bucket(model_dir: Path, tiny_qa: QAWrapper) -> None:
    handler = handler_for("neuron")
    handler.load(model_dir, load_verified(model_dir), RuntimeOptions(threads=2))
    for seq in BUCKETS:
        for batch in range(1, 9):
            inputs = features(batch, seq)
            start, end = handler.predict(inputs)
            assert start.dtype == np.float32 and start.shape == end.shape == (batch, seq)
            args = [torch.from_numpy(inputs[k]) for k in ("input_ids", "attention_mask", "token_type_ids")]
            with torch.no_grad():
                ref_start, ref_end = tiny_qa(*args)
            # bf16 matmult auto-cast; the custom op negates the start logits.
            assert np.allclose(start, -ref_start.numpy(), atol=2e-2)
            assert np.allclose(end, ref_end.numpy(), atol=2e-2)


def test_predict_rejects_shapes_outside_the_contract(model_dir: Path) -> None:
    handler = handler_for("neuron")
    handler.load(model_dir, load_verified(model_dir), RuntimeOptions(threads=1))
    with pytest.raises(HandlerError, match="sequence length 24 is not one of the buckets"):
        handler.predict(features(1, 24))
    with pytest.raises(HandlerError, match=r"batch size 9 is outside 1\.\.8"):
        handler.predict(features(9, 16))


def test_load_needs_the_buckets_and_libraries_it_was_compiled_with(model_dir: Path, tmp_path: Path) -> None:
    manifest = load_verified(model_dir)
    handler = handler_for("neuron")
    wider = manifest.model_copy(update={"sequence_buckets": [16, 32, 48]})
    with pytest.raises(HandlerError, match=r"buckets \[48\] the Neuron model was not compiled for"):
        handler.load(model_dir, wider, RuntimeOptions(threads=1))
    assert manifest.compile is not None
    no_libs = manifest.model_copy(update={"compile": manifest.compile.model_copy(update={"custom_op_libraries": []})})
    out = run_python(
        f"""
        from pathlib import Path
        from container.handlers import HandlerError, RuntimeOptions, handler_for
        from container.manifest import Manifest
        manifest = Manifest.model_validate_json({no_libs.model_dump_json()!r})
        try:
            handler_for("neuron").load(Path({str(model_dir)!r}), manifest, RuntimeOptions(threads=1))
        except HandlerError as exc:
            print(exc)
        """
    )
    assert "calls custom ops of nemu_test" in out
    assert len(out.strip().splitlines()) == 1


def test_handler_imports_no_transformers(model_dir: Path) -> None:
    out = run_python(
        f"""
        import json, sys
        from pathlib import Path
        from container.handlers import RuntimeOptions, handler_for
        from container.manifest import load_verified
        handler = handler_for("neuron")
        handler.load(Path({str(model_dir)!r}), load_verified(Path({str(model_dir)!r})), RuntimeOptions(threads=1))
        heavy = ("transformers", "infra", "onnxruntime")
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy)))
        """
    )
    assert json.loads(out) == []


def write_neuronx_dir(model: torch.nn.Module, directory: Path, neuronx: StandinTorchNeuronx) -> Manifest:
    """A torch_neuronx model directory as `sagebox compile --backend torch-neuronx` writes it (stand-in compiler)."""
    artifact = trace_neuronx(model, BUCKETS, 1, None, directory, neuronx)
    (directory / "tokenizer.json").write_text("{}")
    manifest = Manifest(
        tool_version="0.1.0",
        variant="neuron",
        runtime="neuron",
        model_file=artifact.model_file,
        tokenizer=TokenizerSpec(max_length=64),
        sequence_buckets=BUCKETS,
        source=SourceSpec(name="tiny-bert", architecture="bert"),
        compile=artifact.compile_spec,
        files=hash_files(directory),
    )
    (directory / "manifest.json").write_text(manifest.to_json())
    return load_verified(directory)


def test_a_torch_neuronx_artifact_loads_each_bucket_graph_through_torch_neuronx(
    tiny_qa: QAWrapper, standin_torch_neuronx: StandinTorchNeuronx, tmp_path: Path
) -> None:
    manifest = write_neuronx_dir(tiny_qa, tmp_path, standin_torch_neuronx)
    assert manifest.compile is not None and manifest.compile.backend == "torch_neuronx"
    assert manifest.model_file == "model.neuronx.seq16.pt" and "model.neuronx.seq32.pt" in manifest.files
    compiled = len(standin_torch_neuronx.dynamic_batch_calls)
    handler = handler_for("neuron")
    handler.load(tmp_path, manifest, RuntimeOptions(threads=1))
    # Each bucket's file was loaded with torch_neuronx imported and given dynamic batching again.
    loaded = standin_torch_neuronx.dynamic_batch_calls[compiled:]
    assert len(loaded) == len(BUCKETS) and all(isinstance(m, torch.jit.ScriptModule) for m in loaded)
    for seq in BUCKETS:
        for batch in (1, 3):
            inputs = features(batch, seq)
            start, end = handler.predict(inputs)
            assert start.dtype == np.float32 and start.shape == end.shape == (batch, seq)
            args = [torch.from_numpy(inputs[k]) for k in ("input_ids", "attention_mask", "token_type_ids")]
            with torch.no_grad():
                ref_start, ref_end = tiny_qa(*args)
            # The stand-in's graphs are FP32 CPU TorchScript: the eager model's answer.
            assert np.allclose(start, ref_start.numpy(), atol=1e-5)
            assert np.allclose(end, ref_end.numpy(), atol=1e-5)
    with pytest.raises(HandlerError, match="sequence length 24 is not one of the buckets"):
        handler.predict(features(1, 24))


def test_a_torch_neuronx_artifact_needs_torch_neuronx(
    tiny_qa: QAWrapper, standin_torch_neuronx: StandinTorchNeuronx, tmp_path: Path
) -> None:
    manifest = write_neuronx_dir(tiny_qa, tmp_path, standin_torch_neuronx)
    sys.modules["torch_neuronx"] = None  # type: ignore[assignment]  # as on a host without the Neuron SDK
    with pytest.raises(HandlerError) as caught:
        handler_for("neuron").load(tmp_path, manifest, RuntimeOptions(threads=1))
    message = str(caught.value)
    assert message.startswith("this model was compiled by torch-neuronx and needs a Neuron host (the Neuron image")
    assert "\n" not in message


def test_a_torch_neuronx_manifest_needs_every_bucket_graph(
    tiny_qa: QAWrapper, standin_torch_neuronx: StandinTorchNeuronx, tmp_path: Path
) -> None:
    manifest = write_neuronx_dir(tiny_qa, tmp_path, standin_torch_neuronx)
    files = {k: v for k, v in manifest.files.items() if k != "model.neuronx.seq32.pt"}
    with pytest.raises(HandlerError, match=r"buckets \[32\] without their torch-neuronx graphs \(model.neuronx.seq32"):
        handler_for("neuron").load(tmp_path, manifest.model_copy(update={"files": files}), RuntimeOptions(threads=1))
    (tmp_path / "model.neuronx.seq16.pt").write_bytes(b"not a TorchScript archive")
    with pytest.raises(HandlerError, match=r"torch-neuronx cannot load model\.neuronx\.seq16\.pt: "):
        handler_for("neuron").load(tmp_path, manifest, RuntimeOptions(threads=1))


def test_an_emulator_artifact_does_not_import_torch_neuronx(model_dir: Path, without_torch_neuronx: None) -> None:
    manifest = load_verified(model_dir)
    assert manifest.compile is not None and manifest.compile.backend == "neuron_emu"
    handler = handler_for("neuron")
    handler.load(model_dir, manifest, RuntimeOptions(threads=1))
    assert handler.predict(features(2, 16))[0].shape == (2, 16)
