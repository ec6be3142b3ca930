"""The serving container's neuron handler on a compile_qa artifact (custom ops included)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import neuron_emu
from container.handlers import HandlerError, RuntimeOptions, handler_for
from container.manifest import CompileSpec, Manifest, SourceSpec, TokenizerSpec, hash_files, load_verified
from neuron_emu.custom_op import LoadedLibrary
from tests.neuron_emu.conftest import QAWrapper, run_python
from tests.neuron_emu.test_qa import QAWithCustomOp

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
