from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from container.handlers import HandlerError
from container.manifest import MANIFEST_NAME, load_verified
from container.predictor import Predictor
from container.tasks.question_answering import qa_processor
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import QAExample
from sagebox.pipeline.quantize.calibration import calibration_batches, processor_for
from sagebox.pipeline.quantize.int8 import build_int8
from sagebox.pipeline.quantize.options import QuantizeOptions


def _logits(model_dir: Path, examples: list[QAExample]) -> np.ndarray:
    predictor = Predictor.load(model_dir)
    features = [f for e in examples[:6] for f in qa_processor(predictor.task).featurize(e.question, e.context)]
    return np.concatenate(
        [s[f.attention_mask == 1] for (s, _), f in zip(predictor.run(features), features, strict=True)]
    )


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize(
    ("backend", "mode"),
    [("onnxruntime", "dynamic"), ("onnxruntime", "static"), ("torch", "dynamic"), ("torch", "static")],
)
def test_int8_artifact_is_verified_recorded_and_close_to_fp32(
    backend: str,
    mode: str,
    tiny_hf_folder: Path,
    tiny_model_dir: Path,
    tiny_onnx_model_dir: Path,
    dev_examples: list[QAExample],
    tmp_path: Path,
) -> None:
    fp32_dir = tiny_onnx_model_dir if backend == "onnxruntime" else tiny_model_dir
    fp32 = load_verified(fp32_dir)
    feeds = calibration_batches(dev_examples, processor_for(fp32_dir, fp32.sequence_buckets), batches=8)
    options = QuantizeOptions(backend=backend, mode=mode, calibration_batches=8)  # type: ignore[arg-type]
    manifest = build_int8(tiny_hf_folder, fp32_dir, tmp_path / "int8", options, feeds)

    assert load_verified(tmp_path / "int8") == manifest
    assert manifest.variant == "int8"
    assert manifest.runtime == fp32.runtime
    assert manifest.sequence_buckets == fp32.sequence_buckets
    q = manifest.quantization
    assert q is not None
    assert (q.backend, q.mode, q.per_channel) == (backend, mode, True)
    assert q.calibration_batches == (8 if mode == "static" else 0)
    assert q.engine == ("x86" if backend == "torch" else None)
    expected_method = {"onnxruntime": "percentile", "torch": "histogram"}[backend] if mode == "static" else None
    assert q.calibration_method == expected_method
    assert sorted(p.name for p in (tmp_path / "int8").iterdir()) == sorted(
        [MANIFEST_NAME, manifest.model_file, "tokenizer.json"]
    )
    model_file = tmp_path / "int8" / manifest.model_file
    if backend == "onnxruntime":
        import onnx

        ops = {node.op_type for node in onnx.load(str(model_file)).graph.node}
        integer_ops = {
            "DynamicQuantizeMatMul",
            "MatMulInteger",
            "QAttention",
            "QuantizeLinear",
            "QEmbedLayerNormalization",
        }
        assert ops & integer_ops, ops
        assert model_file.stat().st_size < 0.5 * (fp32_dir / fp32.model_file).stat().st_size
    else:
        import torch

        graph = str(torch.jit.load(str(model_file)).inlined_graph)
        assert "quantized::linear" in graph
    assert _cosine(_logits(tmp_path / "int8", dev_examples), _logits(fp32_dir, dev_examples)) > 0.98


def test_static_without_calibration_is_refused(tiny_hf_folder: Path, tiny_onnx_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="needs calibration data"):
        build_int8(tiny_hf_folder, tiny_onnx_model_dir, tmp_path / "x", QuantizeOptions(mode="static"))
    assert not (tmp_path / "x").exists()
    assert list(tmp_path.iterdir()) == []  # no staging leftovers


def test_backend_must_match_the_fp32_runtime(tiny_hf_folder: Path, tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="holds a torchscript model"):
        build_int8(tiny_hf_folder, tiny_model_dir, tmp_path / "x", QuantizeOptions(backend="onnxruntime"))


def test_options_are_validated() -> None:
    with pytest.raises(SageboxError, match="unknown backend"):
        QuantizeOptions(backend="tensorrt")  # type: ignore[arg-type]
    with pytest.raises(SageboxError, match="at least one batch"):
        QuantizeOptions(calibration_batches=0)
    with pytest.raises(SageboxError, match="'histogram' is not available for onnxruntime"):
        QuantizeOptions(backend="onnxruntime", calibration_method="histogram")
    assert QuantizeOptions(backend="torch", mode="static", calibration_method="minmax").spec(5).calibration_method == (
        "minmax"
    )


def test_torchscript_handler_refuses_an_engine_it_lacks(
    tiny_hf_folder: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    build_int8(tiny_hf_folder, tiny_model_dir, tmp_path / "int8", QuantizeOptions(backend="torch"))
    manifest_path = tmp_path / "int8" / MANIFEST_NAME
    data = json.loads(manifest_path.read_text())
    data["quantization"]["engine"] = "no-such-engine"
    manifest_path.write_text(json.dumps(data))
    with pytest.raises(HandlerError, match="no-such-engine"):
        Predictor.load(tmp_path / "int8")
