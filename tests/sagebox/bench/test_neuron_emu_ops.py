from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.bench import neuron_emu_ops as bench_neuron_emu


@pytest.mark.slow
def test_benchmark_writes_results_and_judges_them_against_its_budget(tmp_path: Path) -> None:
    """The budgets are the benchmark's verdict, not the test's: the suite shares the CPUs with other tests (CI saw a
    custom-op call take 69.6 us against 5.4 us native, 2026-12-07), so what is asserted is that the verdict and the
    exit code follow the measured figures, whatever they are."""
    out = tmp_path / "bench.json"
    code = bench_neuron_emu.main(["--out", str(out), "--rounds", "5", "--calls", "2000", "--load-repeats", "1"])
    results = json.loads(out.read_text())
    overhead, load = results["call_overhead"], results["warm_load"]
    assert overhead["custom_op_us_median"] > 0 and overhead["native_op_us_median"] > 0
    assert overhead["rounds"] == 5 and overhead["calls_per_round"] == 2000
    assert overhead["overhead_us"] == pytest.approx(
        overhead["custom_op_us_median"] - overhead["native_op_us_median"], abs=1e-2
    )
    assert load["median_s"] > 0
    assert overhead["passed"] == (overhead["overhead_us"] <= overhead["budget_us"])
    assert load["passed"] == (load["median_s"] <= load["budget_s"])
    assert results["passed"] == (overhead["passed"] and load["passed"])
    assert code == (0 if results["passed"] else 1)
