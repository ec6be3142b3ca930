"""The runner-overhead benchmark's arithmetic and output (its figures themselves live in its JSON, not here)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import torch

from neuron_emu.runner import overhead


def test_measure_reports_medians_calls_and_cost_per_call_from_the_given_clock() -> None:
    ticks = itertools.count()
    result = overhead.measure(rounds=3, steps=4, clock=lambda: float(next(ticks)))
    # Every block reads the clock twice in a row around its steps: 1 tick per block of 4 steps.
    assert result["with_mode_us_per_step"] == result["without_mode_us_per_step"] == 1e6 / 4
    assert result["forwarding_mode_us_per_step"] == 1e6 / 4
    assert result["overhead_us_per_call"] == 0.0
    assert result["torch_calls_per_step"] > 10  # linear, relu, nll_loss, backward, optimizer updates, ...
    assert (result["rounds"], result["steps_per_round"]) == (3, 4)


def test_the_two_steps_compute_the_same_loss() -> None:
    from neuron_emu.runner.device import XlaOnCpu

    with XlaOnCpu():
        on_xla = overhead.training_step("xla")()
    assert on_xla == overhead.training_step("cpu")()


def test_main_writes_json(tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    out = tmp_path / "bench.json"
    try:
        assert overhead.main(["--out", str(out), "--rounds", "1", "--steps", "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    written = json.loads(out.read_text())
    assert written["command"] == "python -m neuron_emu.runner.overhead"
    assert set(written["measured"]) >= {"with_mode_us_per_step", "without_mode_us_per_step", "overhead_us_per_call"}
    assert written["machine"]["torch"] == torch.__version__
