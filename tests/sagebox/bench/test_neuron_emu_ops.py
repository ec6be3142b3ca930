from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.bench import neuron_emu_ops as bench_neuron_emu


@pytest.mark.slow
def test_benchmark_writes_results_within_budget(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    code = bench_neuron_emu.main(["--out", str(out), "--rounds", "5", "--calls", "2000", "--load-repeats", "1"])
    results = json.loads(out.read_text())
    overhead, load = results["call_overhead"], results["warm_load"]
    assert overhead["custom_op_us_median"] > 0 and overhead["native_op_us_median"] > 0
    assert overhead["rounds"] == 5 and overhead["calls_per_round"] == 2000
    assert overhead["overhead_us"] == pytest.approx(
        overhead["custom_op_us_median"] - overhead["native_op_us_median"], abs=1e-2
    )
    assert 0 < load["median_s"] <= 1.0
    assert results["passed"] is True and code == 0
