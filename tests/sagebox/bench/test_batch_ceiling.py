from __future__ import annotations

from pathlib import Path

import pytest

from container.predictor import Predictor, PredictorOptions
from sagebox.bench.batch_ceiling import model_ceiling, op_time_by_run


def _kernel(op: str, ts: int, dur: int) -> dict[str, object]:
    return {"cat": "Node", "name": f"{op}_node_kernel_time", "ts": ts, "dur": dur, "args": {"op_name": op}}


def test_kernel_times_go_to_the_run_that_holds_them() -> None:
    events = [
        {"cat": "Session", "name": "model_run", "ts": 200, "dur": 50},  # listed out of order on purpose
        {"cat": "Session", "name": "model_run", "ts": 100, "dur": 50},
        _kernel("MatMul", 110, 10),
        _kernel("MatMul", 130, 5),
        _kernel("Gelu", 210, 7),
        _kernel("MatMul", 220, 3),
        _kernel("MatMul", 170, 99),  # between runs: session overhead, not a run's kernel
        {"cat": "Node", "name": "MatMul_node_fence_before", "ts": 120, "dur": 1, "args": {"op_name": "MatMul"}},
    ]
    assert op_time_by_run(events) == [{"MatMul": 15.0}, {"Gelu": 7.0, "MatMul": 3.0}]


def test_no_runs_no_times() -> None:
    assert op_time_by_run([_kernel("MatMul", 1, 1)]) == []


@pytest.mark.slow
def test_ceiling_of_a_tiny_onnx_model(tiny_onnx_model_dir: Path) -> None:
    predictor = Predictor.load(tiny_onnx_model_dir, PredictorOptions(threads=1))
    result = model_ceiling(predictor, tiny_onnx_model_dir, [64, 128], [2, 4], 1, 64)
    assert result["batches"] == [2, 4] and set(result["buckets"]) == {"64", "128"}
    for bucket in result["buckets"].values():
        assert set(bucket["batched"]) == {"2", "4"}
        for batched in bucket["batched"].values():
            assert batched["gain"] == pytest.approx(bucket["ms_per_sample_alone"] / batched["ms_per_sample"], 0.05)
    assert result["ops_at_bucket"] == 64 and result["op_gain"]["batch"] == 4
    ops = result["op_gain"]["ops"]
    # Profiled the way the server runs the model: residual adds stay apart from their layer norms.
    assert "LayerNormalization" in ops and "SkipLayerNormalization" not in ops
    alone = [v["ms_per_sample_alone"] for v in ops.values()]
    assert alone == sorted(alone, reverse=True) and alone[0] > 0
