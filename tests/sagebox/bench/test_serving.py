from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.bench import serving as bench_serving


@pytest.mark.slow
def test_benchmark_measures_overhead_gateway_and_throughput(tiny_onnx_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "serving.json"
    args = ["--out", str(out), "--rounds", "20", "--queries", "8", "--cold-starts", "1"]
    models = ["--small-model-dir", str(tiny_onnx_model_dir), "--int8-model-dir", str(tiny_onnx_model_dir)]
    code = bench_serving.main([*args, *models, "--request-path", str(tiny_onnx_model_dir)])
    assert code == 0
    report = json.loads(out.read_text())
    assert set(report["overhead"]) == {"long_paragraph", "squad_style"}
    assert report["overhead"]["long_paragraph"]["tokens"] > report["overhead"]["squad_style"]["tokens"]
    overhead = report["overhead"]["squad_style"]
    assert overhead["rounds"] == 20
    handler, pipeline, served = (
        overhead[k]["p50_ms"] for k in ("direct_handler_call", "direct_full_pipeline", "http_invocations")
    )
    assert 0 < handler <= pipeline < served  # tokenizing costs something, HTTP costs more
    assert overhead["overhead_p50_ms_vs_handler"] == pytest.approx(served - handler)
    gateway = report["gateway"]
    assert gateway["direct_http"]["p50_ms"] < gateway["gateway_boto3"]["p50_ms"]  # two more hops and botocore
    assert gateway["gateway_overhead_p50_ms"] == pytest.approx(
        gateway["gateway_http"]["p50_ms"] - gateway["direct_http"]["p50_ms"]
    )
    throughput = report["throughput"]
    for workload in ("short_questions", "squad_style", "long_paragraph"):
        run = throughput[workload]
        assert run["concurrency_8_batched"]["qps"] > 0 and run["sequential"]["qps"] > 0
        assert sum(run["server_batch_sizes"].values()) > 0
        assert run["qps_ratio_batched_c8_vs_sequential"] == pytest.approx(
            run["concurrency_8_batched"]["qps"] / ((run["sequential"]["qps"] + run["sequential_repeat"]["qps"]) / 2)
        )
    [path] = report["request_path"]
    assert path["task"] == "question-answering" and path["rounds"] == 20 and sum(path["tokens"]) > 16
    steps = ("model_call", "in_process_pipeline", "server_http", "gateway_http", "gateway_boto3")
    assert all(path[step]["p50_ms"] > 0 for step in steps)
    assert path["model_call"]["p50_ms"] < path["server_http"]["p50_ms"]  # the server does the model call and more
    assert path["boto3_path_over_pipeline"] == pytest.approx(
        path["gateway_boto3"]["p50_ms"] / path["in_process_pipeline"]["p50_ms"]
    )
    cold = report["cold_start"]
    assert cold["starts"] == 1 and cold["runtime"] == "onnxruntime" and cold["floor_median_s"] > 0
    parts = cold["breakdown_median_s"]
    # The server's own account of its start adds up to no more than the client waited for /ping 200.
    accounted = sum(parts[k] for k in ("imports_s", "http_server_start_s", "load_s"))
    assert accounted == pytest.approx(parts["ready_after_start_s"], abs=0.02)
    assert parts["ready_after_start_s"] <= cold["ping_200_median_s"] + 0.05
    assert cold["runs"][0]["warmed_buckets"] == [64, 384]
    assert "cpu" in report["machine"]
    ceiling = report["batching_ceiling"]
    assert ceiling["batches"] == [2, 4, 8] and set(ceiling["buckets"]) == {"64", "128", "256", "384"}
    assert all(set(b["batched"]) == {"2", "4", "8"} for b in ceiling["buckets"].values())
    assert all(b["ms_per_sample_alone"] > 0 for b in ceiling["buckets"].values())
    assert ceiling["ops_at_bucket"] == 128 and ceiling["op_gain"]["ops"]
