from __future__ import annotations

import json
from pathlib import Path

import pytest

from container.manifest import ManifestError, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import load_squad
from sagebox.pipeline.quantize.options import EMBEDDING_OP_TYPES as EMBEDDINGS
from sagebox.pipeline.quantize.options import QuantizeOptions
from sagebox.pipeline.quantize_flow import REPORT_NAME, QuantizeRequest, run_quantize
from tests.sagebox.conftest import TINY_MODEL_MAX_F1_DROP

# A tiny random model has near-tied spans that INT8 rounding can flip (one of 40 answers costs 2.5 F1 points); a
# sound recipe stays within this, a broken one loses more than 20 points (test_gate_trips_...).


def test_quantize_builds_evaluates_and_keeps_a_passing_int8(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path
) -> None:
    lines: list[str] = []
    request = QuantizeRequest(
        outlier_hf_folder, tmp_path / "out", self_consistent_json, max_f1_drop=TINY_MODEL_MAX_F1_DROP
    )
    outcome = run_quantize(request, say=lines.append)
    assert outcome.gate.passed
    assert outcome.fp32.score.total == len(load_squad(self_consistent_json)) >= 30
    assert outcome.gate.f1_drop <= TINY_MODEL_MAX_F1_DROP
    assert load_verified(tmp_path / "out" / "fp32").variant == "fp32"
    assert load_verified(tmp_path / "out" / "int8").variant == "int8"
    report = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    assert report["gate"]["passed"] is True
    assert report["int8"]["f1"] == pytest.approx(outcome.int8.score.f1)
    assert report["int8"]["model_dir"] == str(tmp_path / "out" / "int8")
    assert report["quantization"]["backend"] == "onnxruntime"
    assert outcome.sizes["int8"] < outcome.sizes["fp32"]
    assert any("evaluating INT8" in line for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # staging gone


def test_gate_trips_when_int8_is_broken_on_purpose(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path
) -> None:
    # Per-tensor weights on a head whose rows differ 300x: the end-logit row rounds to zero.
    options = QuantizeOptions(per_channel=False)
    outcome = run_quantize(QuantizeRequest(outlier_hf_folder, tmp_path / "out", self_consistent_json, options))
    assert not outcome.gate.passed
    assert outcome.gate.f1_drop > 20
    assert "FAILED" in outcome.gate.message()
    assert not (tmp_path / "out" / "int8").exists()  # a rejected INT8 model is not left looking valid
    load_verified(tmp_path / "out" / "fp32")
    report = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    assert report["gate"]["passed"] is False
    assert report["int8"]["model_dir"] is None


def test_a_failing_recipe_falls_back_to_the_next_one(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path
) -> None:
    broken, sound = QuantizeOptions(per_channel=False), QuantizeOptions(per_channel=True)
    request = QuantizeRequest(
        outlier_hf_folder,
        tmp_path / "out",
        self_consistent_json,
        broken,
        max_f1_drop=TINY_MODEL_MAX_F1_DROP,
        fallbacks=(sound,),
    )
    outcome = run_quantize(request)
    assert outcome.gate.passed
    assert [a["passed"] for a in outcome.attempts] == [False, True]
    manifest = load_verified(tmp_path / "out" / "int8")
    assert manifest.quantization is not None and manifest.quantization.per_channel
    report = json.loads((tmp_path / "out" / REPORT_NAME).read_text())
    assert [a["options"] for a in report["attempts"]] == [broken.describe(), sound.describe()]


def test_default_fallbacks_grow_more_conservative() -> None:
    from sagebox.pipeline.quantize.options import fallbacks

    chain = fallbacks(QuantizeOptions())
    assert [c.reduce_range for c in chain] == [False, True, False]
    assert [c.fp32_op_types for c in chain] == [EMBEDDINGS, EMBEDDINGS, (*EMBEDDINGS, "Attention")]
    # A recipe already on the ladder is not tried again.
    assert fallbacks(chain[0])[0] == chain[1]
    assert fallbacks(QuantizeOptions(backend="torch")) == ()
    with pytest.raises(SageboxError, match="onnxruntime backend only"):
        QuantizeOptions(backend="torch", fp32_op_types=("Attention",))


@pytest.mark.parametrize("fuse", [True, False])
def test_embeddings_kept_in_fp32_stay_float(tiny_hf_folder: Path, tmp_path: Path, fuse: bool) -> None:
    import onnx
    from onnx import numpy_helper

    from sagebox.pipeline.export.servable import build_fp32
    from sagebox.pipeline.quantize.int8 import build_int8

    build_fp32(tiny_hf_folder, tmp_path / "fp32", fuse=fuse)
    build_int8(tiny_hf_folder, tmp_path / "fp32", tmp_path / "int8", QuantizeOptions(fp32_op_types=EMBEDDINGS))
    graph = onnx.load(str(tmp_path / "int8" / "model.onnx")).graph
    ops = {n.op_type for n in graph.node}
    assert "QEmbedLayerNormalization" not in ops
    assert "DynamicQuantizeMatMul" in ops or "MatMulInteger" in ops
    # The word-embedding table (vocab x hidden, the largest initializer) is still FP32.
    table = max(graph.initializer, key=lambda t: numpy_helper.to_array(t).size)
    assert table.data_type == onnx.TensorProto.FLOAT


def test_attention_kept_in_fp32_is_left_unquantized(tiny_hf_folder: Path, tmp_path: Path) -> None:
    import onnx

    from sagebox.pipeline.export.servable import build_fp32
    from sagebox.pipeline.quantize.int8 import build_int8

    build_fp32(tiny_hf_folder, tmp_path / "fp32")
    options = QuantizeOptions(fp32_op_types=("Attention",))
    manifest = build_int8(tiny_hf_folder, tmp_path / "fp32", tmp_path / "int8", options)
    ops = {n.op_type for n in onnx.load(str(tmp_path / "int8" / "model.onnx")).graph.node}
    assert "Attention" in ops and "QAttention" not in ops
    assert "DynamicQuantizeMatMul" in ops or "MatMulInteger" in ops
    assert manifest.quantization is not None and manifest.quantization.fp32_op_types == ["Attention"]


def test_threshold_is_configurable(outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path) -> None:
    lenient = QuantizeRequest(
        outlier_hf_folder,
        tmp_path / "out",
        self_consistent_json,
        QuantizeOptions(per_channel=False),
        max_f1_drop=100,
    )
    assert run_quantize(lenient).gate.passed
    with pytest.raises(SageboxError, match="max-f1-drop"):
        run_quantize(QuantizeRequest(outlier_hf_folder, tmp_path / "o2", self_consistent_json, max_f1_drop=-1))


def test_bad_eval_data_fails_before_anything_is_written(tiny_hf_folder: Path, tmp_path: Path, dev_json: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("previous run")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"version": "1.1", "data": []}))
    with pytest.raises(SageboxError, match="holds no questions"):
        run_quantize(QuantizeRequest(tiny_hf_folder, tmp_path / "out", empty))
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [')
    with pytest.raises(SageboxError, match="not valid JSON"):
        run_quantize(
            QuantizeRequest(
                tiny_hf_folder,
                tmp_path / "out",
                dev_json,
                QuantizeOptions(mode="static"),
                calibration_data=broken,
            )
        )
    assert (tmp_path / "out" / "keep.txt").read_text() == "previous run"


def test_bad_model_folders(tiny_hf_folder: Path, tmp_path: Path, dev_json: Path) -> None:
    import shutil

    with pytest.raises(SageboxError, match="does not exist"):
        run_quantize(QuantizeRequest(tmp_path / "missing", tmp_path / "out", dev_json))
    wrong = tmp_path / "gpt2"
    shutil.copytree(tiny_hf_folder, wrong)
    config = json.loads((wrong / "config.json").read_text())
    (wrong / "config.json").write_text(json.dumps(config | {"model_type": "gpt2"}))
    with pytest.raises(SageboxError, match="unsupported architecture 'gpt2'"):
        run_quantize(QuantizeRequest(wrong, tmp_path / "out", dev_json))
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_hf_folder, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(SageboxError, match="cannot load the model"):
        run_quantize(QuantizeRequest(corrupt, tmp_path / "out", dev_json))
    assert not (tmp_path / "out").exists()


def test_a_tampered_artifact_is_refused_by_evaluation(
    tiny_onnx_model_dir: Path, tmp_path: Path, dev_json: Path
) -> None:
    import shutil

    from sagebox.pipeline.quantize_flow import evaluate_only

    copy = tmp_path / "m"
    shutil.copytree(tiny_onnx_model_dir, copy)
    with (copy / "model.onnx").open("ab") as fh:
        fh.write(b"x")
    with pytest.raises(ManifestError, match="tampered"):
        evaluate_only(copy, dev_json)
