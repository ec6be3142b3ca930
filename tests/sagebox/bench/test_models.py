from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.bench import models as bench_models


@pytest.mark.slow
def test_bench_runs_end_to_end_on_a_tiny_model(tiny_hf_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "models.json"
    common = ["--model-folder", str(tiny_hf_folder), "--work-dir", str(tmp_path / "work"), "--out", str(out)]
    # --skip-embeddings: tests/sagebox/pipeline/test_minilm_embeddings.py times its own MiniLM build with the same code
    common += ["--seq", "128", "--skip-accuracy", "--skip-peers", "--skip-embeddings"]
    code = bench_models.main([*common, "--rounds", "3", "--threads", "1", "--calibration-batches", "4"])
    assert code == 0
    result = json.loads(out.read_text())
    names = {v.name for v in bench_models.VARIANTS}
    assert set(result["variants"]) == names
    # Each assertion names the regression it catches.
    for row in result["variants"].values():
        assert row["n"] == 3  # rounds dropped or double-counted
        assert 0 < row["min_ms"] <= row["p50_ms"] <= row["p90_ms"]  # percentiles computed from the wrong samples
        assert row["model_file_bytes"] > 0  # an artifact measured that was never written
    fp32 = {n: row for n, row in result["variants"].items() if n.startswith("fp32")}
    fastest = min(fp32, key=lambda n: fp32[n]["p50_ms"])
    best = result["best_fp32"]
    assert fp32[best]["p50_ms"] == fp32[fastest]["p50_ms"]  # INT8 compared with a slower FP32 than Sagebox ships
    for row in result["variants"].values():  # ratios against another baseline than the one reported
        assert row["ratio_to_best_fp32_p50"] == pytest.approx(row["p50_ms"] / fp32[best]["p50_ms"], abs=1e-3)
    checks = result["checks"]
    chosen = checks["int8_p50_over_fp32_p50"]["int8"]  # the build a server on this CPU loads
    assert chosen == bench_models.chosen_int8_variant(result)
    ratio = result["variants"][chosen]["p50_ms"] / result["variants"][best]["p50_ms"]
    assert checks["int8_p50_over_fp32_p50"]["value"] == pytest.approx(ratio, abs=1e-3)  # the headline ratio
    assert set(result["tarball_bytes"]) == {best, "int8-onnx-dynamic", "int8-onnx-dynamic-7bit"}
    assert result["default_int8"] in result["tarball_bytes"]
    assert "avx2" in result["machine"]["flags"]
    assert result["load_during_timing"]["wall_s"] > 0
    kernels = result["runtime_checks"]["layer_norm_kernels"]
    assert [k["threads"] for k in kernels] == [1, 1]
    assert all(v > 0 for k in kernels for v in k["p50_us"].values())
    options = result["runtime_checks"]["runtime_options"]
    assert set(options["variants"]) == {f"spin_{a}_flush_{b}" for a in ("on", "off") for b in ("on", "off")}
    assert options["p50_over_default"]["spin_on_flush_on"] == 1.0
    assert options["tokens"] < options["bucket"]  # the timed feature carries padding, like real requests
    emulation = result["torch_avx2_emulation"]
    assert "error" in emulation or set(emulation["variants"]) == {
        "fp32-torchscript",
        "int8-torch-dynamic",
        "int8-torch-static",
    }
    # a second run reuses the verified artifacts instead of rebuilding them
    assert bench_models.main([*common, "--rounds", "2", "--reuse", "--no-package", "--no-avx2-emulation"]) == 0
    assert json.loads(out.read_text())["build_seconds"] == {}
