"""INT8 builds per CPU kind: an OpenVINO build gated beside ONNX Runtime's, merged into one directory, and each
server loading the build for its CPU kind (forced with SAGEBOX_CPU_KIND), the fallback elsewhere."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from container.handlers import HandlerError
from container.handlers.openvino import OpenVinoHandler
from container.manifest import load_verified
from container.predictor import Predictor, PredictorOptions
from sagebox.pipeline.quantize.choose import Timing, kinds_for
from sagebox.pipeline.quantize.options import QuantizeOptions, alternatives_for
from sagebox.pipeline.quantize_flow import REPORT_NAME, QuantizeRequest, run_quantize
from tests.sagebox.conftest import TINY_MODEL_MAX_F1_DROP


@pytest.fixture(scope="module")
def merged(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("per-kind") / "out"
    request = QuantizeRequest(
        outlier_hf_folder,
        out,
        self_consistent_json,
        max_f1_drop=TINY_MODEL_MAX_F1_DROP,
        # 16 calibration batches are plenty for the tiny model (the default, 100, for real ones).
        alternatives=tuple(dataclasses.replace(o, calibration_batches=16) for o in alternatives_for(QuantizeOptions())),
    )
    outcome = run_quantize(request)
    assert outcome.gate.passed
    return out, json.loads((out / REPORT_NAME).read_text())


def test_the_openvino_build_joins_the_int8_directory_as_an_alternative(merged: tuple[Path, dict[str, object]]) -> None:
    out, report = merged
    manifest = load_verified(out / "int8")  # every file, the OpenVINO IR's included, hashed and verified
    assert manifest.runtime == "onnxruntime"  # the fallback: runs on every CPU
    [build] = manifest.alternatives
    assert build.runtime == "openvino"
    assert build.model_file == "openvino/model.xml"
    assert {"openvino/model.xml", "openvino/model.bin"} <= set(manifest.files)
    assert build.quantization is not None and build.quantization.backend == "openvino"
    records = report["alternatives"]
    assert isinstance(records, list) and len(records) == 1
    record: dict[str, Any] = records[0]
    assert record["passed"] is True and record["runtime"] == "openvino"
    assert build.cpu_kinds == record["cpu_kinds"]
    # The build machine's kind follows its own timing, every other kind the measured table.
    timed_on = record["timed_on"]
    assert {k for k in build.cpu_kinds if k != timed_on} == {"avx512_vnni", "amx"} - {timed_on}
    assert f"{timed_on}: measured on the build machine" in build.reason or timed_on not in build.cpu_kinds
    assert not (out / "int8-openvino").exists()


@pytest.mark.parametrize(
    ("listed", "pin", "runtime"),
    [
        (False, "auto", "onnxruntime"),
        (True, "auto", "openvino"),
        (True, "onnxruntime", "onnxruntime"),
        (False, "openvino", "openvino"),
    ],
)
def test_each_cpu_kind_loads_its_build_and_both_answer_alike(
    merged: tuple[Path, dict[str, object]], listed: bool, pin: str, runtime: str
) -> None:
    out, _ = merged
    [build] = load_verified(out / "int8").alternatives
    kind = next(k for k in ("amx", "avx512_vnni", "avx2", "arm64", "other") if (k in build.cpu_kinds) == listed)
    predictor = Predictor.load(out / "int8", PredictorOptions(cpu_kind=kind, runtime_pin=pin))
    assert predictor.manifest.runtime == runtime == predictor.decision.runtime
    assert predictor.decision.cpu_kind == kind
    assert ("pinned" in predictor.decision.reason) == (pin != "auto")
    reference = Predictor.load(out / "int8", PredictorOptions(cpu_kind="other"))
    assert reference.manifest.runtime == "onnxruntime"
    feature = predictor.task.filler_feature(predictor.task.buckets[-1])
    ours, theirs = predictor.predict_batch([feature]), reference.predict_batch([feature])
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and np.isfinite(a).all()
        assert np.corrcoef(a.ravel(), b.ravel())[0, 1] > 0.9  # the same model, two INT8 recipes


def test_pinning_a_runtime_the_directory_lacks_is_one_clear_error(merged: tuple[Path, dict[str, object]]) -> None:
    out, _ = merged
    with pytest.raises(HandlerError, match=r"SAGEBOX_RUNTIME=torchscript but this model has no torchscript build"):
        Predictor.load(out / "int8", PredictorOptions(runtime_pin="torchscript"))


def test_the_build_machine_measurement_overrides_the_table_for_its_own_kind() -> None:
    slower = Timing("avx512_vnni", 2, 5, {"onnxruntime": {128: 10.0, 384: 30.0}, "openvino": {128: 11.0, 384: 25.0}})
    kinds, reason = kinds_for("openvino", "onnxruntime", slower)
    assert "avx512_vnni" not in kinds and "amx" in kinds  # slower at one length here: this kind keeps the fallback
    faster = Timing("avx2", 2, 5, {"onnxruntime": {128: 10.0, 384: 30.0}, "openvino": {128: 9.0, 384: 25.0}})
    kinds, reason = kinds_for("openvino", "onnxruntime", faster)
    assert "avx2" in kinds and reason.startswith("avx2: measured on the build machine")
    assert kinds_for("openvino", "onnxruntime", None)[0] == ["amx", "avx512_vnni"]


def test_a_server_is_ready_on_the_dynamic_graph_and_compiles_a_static_one_per_bucket_used(
    merged: tuple[Path, dict[str, object]],
) -> None:
    out, _ = merged
    at_load = Predictor.load(out / "int8", PredictorOptions(runtime_pin="openvino"))
    served = Predictor.load(out / "int8", PredictorOptions(runtime_pin="openvino", background_compile=True))
    handler = served.handler
    assert isinstance(handler, OpenVinoHandler) and isinstance(at_load.handler, OpenVinoHandler)
    assert at_load.handler.static_shapes == at_load.task.buckets  # the tiny model fits every bucket's graph
    assert handler.static_shapes == []  # warm-up ran on the dynamic graph and asked for nothing
    feature = served.task.filler_feature(served.task.buckets[0])
    early = served.predict_batch([feature])  # answered by the dynamic graph, which asks for its bucket's static one
    handler.wait_for_static_graphs()
    assert handler.static_shapes == [served.task.buckets[0]]  # only the bucket traffic used
    late, reference = served.predict_batch([feature]), at_load.predict_batch([feature])
    for a, b, c in zip(early, late, reference, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-3, atol=1e-3)
        np.testing.assert_allclose(b, c, rtol=1e-5, atol=1e-5)
    none = Predictor.load(out / "int8", PredictorOptions(runtime_pin="openvino", static_shapes_mb=0))
    assert isinstance(none.handler, OpenVinoHandler) and none.handler.static_shapes == []
