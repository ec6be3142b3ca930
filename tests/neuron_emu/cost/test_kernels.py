"""The custom-op kernel cost model: the same ReLU written three ways gets three very different estimates,
and every figure is the emulator's access profile times the constants in neuron_emu/data."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest
import torch

import neuron_emu
from neuron_emu.compiler_args import parse_compiler_args
from neuron_emu.cost.core_spec import neuroncore_v2
from neuron_emu.cost.graph import GraphOp, graph_ops
from neuron_emu.cost.kernels import (
    KernelConstants,
    calibration_constants,
    core_time,
    kernel_calibration,
    kernel_constants,
    kernel_cost,
    match_calls,
)
from neuron_emu.cost.plan import CostPlan, OpCost, op_costs
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.custom_op.profile import CallProfile, CoreCounts

SHAPE = (64, 1024)  # 65536 elements: 64 blocks of the kernels' 1024-float TCM buffer


def traced_row(op: Callable[[torch.Tensor], torch.Tensor]) -> tuple[OpCost, CostPlan]:
    torch.manual_seed(0)
    x = torch.randn(*SHAPE)
    traced = neuron_emu.trace(lambda t: op(t), x)
    plan = neuron_emu.cost_plan(traced)
    [row] = [c for c in plan.ops if c.engine == "gpsimd"]
    return row, plan


def expected_times(counts: CoreCounts, constants: dict[str, float], sharing: int) -> tuple[float, float, float]:
    """The model written out once more, from the counts and the plan's recorded constants."""
    hbm = (
        (counts.accessor_reads + counts.accessor_writes + counts.stream_uncached_reads + counts.stream_uncached_writes)
        * constants["hbm_access_ns"]
        / 1000
    )
    transfers = counts.tcm_transfers + counts.stream_transfers
    moved = counts.tcm_bytes + counts.stream_bytes
    dma = transfers * constants["dma_transfer_us"] + moved / (constants["dma_bytes_per_s"] / sharing) * 1e6
    computed = (
        counts.accessor_writes
        + counts.stream_writes
        + counts.stream_uncached_writes
        + counts.tcm_elements_out
        + counts.library_elements
    )
    return hbm, dma, computed / constants["compute_elements_per_s"] * 1e6


def test_three_relu_styles_rank_accessor_far_above_tcm_above_multicore(
    relu_styles: LoadedLibrary, multicore_ops: LoadedLibrary
) -> None:
    accessor, plan = traced_row(torch.ops.nemu_relu.relu_accessor)
    tcm, _ = traced_row(torch.ops.nemu_relu.relu_tcm)
    multicore, _ = traced_row(torch.ops.nemu_multicore.relu)
    assert accessor.time_us > 20 * tcm.time_us  # element-by-element memory access vs 4 KB blocks
    assert tcm.time_us > 4 * multicore.time_us  # the blocks split over 8 GPSIMD cores
    assert (accessor.bound, tcm.bound, multicore.bound) == ("hbm-access", "dma", "dma")
    assert all(r.kernel is not None for r in (accessor, tcm, multicore))
    # The plan's latency is what the rows say.
    assert plan.totals["latency_us"] == pytest.approx(sum(c.time_us for c in plan.ops))

    n = SHAPE[0] * SHAPE[1]
    torch.manual_seed(0)
    positive = int((torch.randn(*SHAPE) > 0).sum())
    for row, counts in (
        (accessor, {"accessor_reads": n + positive, "accessor_writes": n, "tcm_transfers": 0}),
        (tcm, {"accessor_reads": 0, "tcm_transfers": 2 * n // 1024, "tcm_bytes": 8 * n, "tcm_elements_out": n}),
        (multicore, {"tcm_transfers": 2 * n // 8 // 1024, "tcm_bytes": 8 * n // 8, "tcm_elements_out": n // 8}),
    ):
        kernel = row.kernel
        assert kernel is not None
        assert {k: kernel.counts[k] for k in counts} == counts  # the profile is what the kernel source does


@pytest.mark.parametrize("style", ["relu_accessor", "relu_tcm", "relu_stream", "relu_stream_pool_full", "multicore"])
def test_each_figure_is_profile_counts_times_constants(
    relu_styles: LoadedLibrary, multicore_ops: LoadedLibrary, style: str
) -> None:
    op = torch.ops.nemu_multicore.relu if style == "multicore" else getattr(torch.ops.nemu_relu, style)
    row, plan = traced_row(op)
    kernel = row.kernel
    assert kernel is not None
    constants = plan.kernel_constants
    assert constants == kernel_constants().to_dict()
    assert constants["hbm_access_ns"] == 243.9 and constants["dma_transfer_us"] == 2.426
    hbm, dma, compute = expected_times(CoreCounts.from_dict(kernel.counts), constants, kernel.dma_sharing_cores)
    assert kernel.hbm_access_us == pytest.approx(hbm, rel=1e-12)
    assert kernel.dma_us == pytest.approx(dma, rel=1e-12)
    assert kernel.compute_us == pytest.approx(compute, rel=1e-12)
    assert row.time_us == kernel.time_us == pytest.approx(hbm + dma + compute, rel=1e-12)
    assert kernel.cores == (8 if style == "multicore" else 1)
    assert kernel.dma_sharing_cores == (8 if style == "multicore" else 1)
    total = CoreCounts.from_dict(kernel.all_cores)
    assert row.flops == total.elements_computed == SHAPE[0] * SHAPE[1]
    assert row.hbm_bytes == total.dma_bytes


def test_streams_cost_like_tcm_blocks_unless_they_get_no_window(relu_styles: LoadedLibrary) -> None:
    stream, _ = traced_row(torch.ops.nemu_relu.relu_stream)
    tcm, _ = traced_row(torch.ops.nemu_relu.relu_tcm)
    starved, _ = traced_row(torch.ops.nemu_relu.relu_stream_pool_full)
    # 4 KB stream windows and 1024-float TCM buffers move the same blocks.
    assert stream.time_us == pytest.approx(tcm.time_us)
    assert starved.bound == "hbm-access" and starved.time_us > 20 * stream.time_us


def test_the_slowest_core_sets_the_time_and_cores_share_the_dma_bandwidth() -> None:
    constants = KernelConstants(
        hbm_access_ns=100.0, dma_transfer_us=1.0, dma_bytes_per_s=1e9, compute_elements_per_s=1e9
    )
    light = CoreCounts(tcm_transfers=1, tcm_bytes=1000, tcm_elements_out=250)
    heavy = CoreCounts(tcm_transfers=4, tcm_bytes=4000, tcm_elements_out=1000, accessor_reads=10)
    call = CallProfile("ns::op", True, (light, heavy, CoreCounts()))
    cost = kernel_cost(call, constants)
    assert (cost.cores, cost.critical_core, cost.dma_sharing_cores) == (3, 1, 2)
    # heavy: 10 accesses x 100 ns; 4 transfers x 1 us + 4000 B at (1e9 / 2 cores) B/s; 1000 elements at 1e9/s.
    assert cost.hbm_access_us == pytest.approx(1.0)
    assert cost.dma_us == pytest.approx(4.0 + 8.0)
    assert cost.compute_us == pytest.approx(1.0)
    assert cost.time_us == pytest.approx(14.0)
    assert cost.all_cores["tcm_bytes"] == 5000
    assert core_time(light, constants, 2).total_us < cost.time_us


def test_derived_constants_follow_from_the_published_tutorial_figures() -> None:
    """gpsimd_kernels.json stores two derived constants next to the published figures they come from; this
    recomputes them so neither can change without the other."""
    hbm_access_ns, dma_transfer_us = calibration_constants(kernel_calibration(), neuroncore_v2())
    stored = kernel_constants()
    assert hbm_access_ns == pytest.approx(stored.hbm_access_ns, abs=0.05)
    assert dma_transfer_us == pytest.approx(stored.dma_transfer_us, abs=0.0005)
    # The published throughputs fix them: a 10x faster accessor run would give a >9x smaller access latency.
    faster = kernel_calibration()
    faster["inferences_per_s"] = {**faster["inferences_per_s"], "accessor": 81.0}
    assert calibration_constants(faster, neuroncore_v2())[0] < hbm_access_ns / 9
    # Published chip figures behind the rest: 1 TB/s DMA per chip over 2 cores; 512-bit GPSIMD cores.
    assert stored.dma_bytes_per_s == 0.5e12
    assert stored.compute_elements_per_s == pytest.approx(16 * 1.4e9)


def test_a_plan_with_kernel_rows_round_trips_and_shows_the_breakdown(relu_styles: LoadedLibrary) -> None:
    row, plan = traced_row(torch.ops.nemu_relu.relu_tcm)
    assert CostPlan.from_dict(json.loads(plan.to_json())) == plan
    text = plan.to_text()
    assert "custom-op kernels" in text and "nemu_relu::relu_tcm" in text
    assert row.kernel is not None and f"{row.kernel.dma_us:.2f}" in text
    assert "243.9 ns per element access (derived)" in text


def test_calls_that_do_not_match_the_graph_get_no_profile(relu_styles: LoadedLibrary) -> None:
    def op(kind: str) -> GraphOp:
        return GraphOp(kind, (), (), (), "", False, kind)

    ops = [op("aten::mul"), op("nemu_relu::relu_tcm"), op("nemu_relu::relu_accessor")]
    tcm = CallProfile("nemu_relu::relu_tcm", False, (CoreCounts(tcm_transfers=2),))
    accessor = CallProfile("nemu_relu::relu_accessor", False, (CoreCounts(accessor_reads=1),))
    assert match_calls(ops, {"nemu_relu": False}, [tcm, accessor]) == {1: tcm, 2: accessor}
    assert match_calls(ops, {"nemu_relu": False}, [accessor, tcm]) == {}
    assert match_calls(ops, {"nemu_relu": False}, [tcm]) == {}


def test_without_a_profile_a_custom_op_keeps_the_shape_based_estimate(test_ops: LoadedLibrary) -> None:
    torch.manual_seed(0)
    traced = torch.jit.trace(lambda t: torch.ops.nemu_test.tcm_negate(t), torch.randn(4, 256))
    ops = graph_ops(traced.graph)
    [row], _ = op_costs(ops, parse_compiler_args("--auto-cast none"), neuroncore_v2(), {"nemu_test": False})
    assert row.kernel is None and "no access profile" in row.note
    assert row.time_us == pytest.approx(2048 / (16 * 1.4e9) * 1e6)
    assert math.isclose(row.flops, 2048)
