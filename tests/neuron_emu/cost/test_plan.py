"""Cost-plan figures for graphs small enough to work out by hand from the NeuronCore-v2 numbers.

NeuronCore-v2: tensor engine 92 TFLOPS (bf16) / 23 TFLOPS (fp32), vector 2.3, scalar 2.9 TFLOPS;
a chip's 820 GiB/s of HBM bandwidth is shared by its 2 cores.
"""

from __future__ import annotations

import json

import pytest
import torch

import neuron_emu
from neuron_emu.cost.plan import CostPlan, OpCost
from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.errors import NeuronEmuError

HBM_PER_CORE = 820 * 2**30 / 2


class LinearRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(128, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))


def plan_for(args: str) -> CostPlan:
    torch.manual_seed(0)
    traced = neuron_emu.trace(LinearRelu().eval(), torch.randn(4, 128), compiler_args=args)
    return neuron_emu.cost_plan(traced)


def costed(plan: CostPlan) -> dict[str, OpCost]:
    return {c.op: c for c in plan.ops if c.engine != "none"}


def test_linear_relu_in_bf16() -> None:
    plan = plan_for("--auto-cast matmult --auto-cast-type bf16")
    ops = costed(plan)
    assert set(ops) == {"aten::linear", "aten::relu"}
    linear, relu = ops["aten::linear"], ops["aten::relu"]
    # 2*M*K*N multiply-adds plus the bias add: 2*4*128*256 + 4*256.
    assert linear.flops == 263168
    assert (linear.engine, linear.dtype) == ("tensor", "bf16")
    # Weight and bias stored in bf16: (256*128 + 256) * 2 bytes, read from HBM every inference.
    assert linear.weight_bytes == 66048
    assert linear.hbm_bytes == 66048
    assert linear.bound == "memory"
    assert linear.time_us == pytest.approx(66048 / HBM_PER_CORE * 1e6)
    assert (relu.engine, relu.flops, relu.hbm_bytes) == ("scalar", 1024, 0)
    assert relu.time_us == pytest.approx(1024 / 2.9e12 * 1e6)
    latency_us = 66048 / HBM_PER_CORE * 1e6 + 1024 / 2.9e12 * 1e6
    assert plan.totals["latency_us"] == pytest.approx(latency_us)
    assert plan.totals["flops"] == 263168 + 1024
    assert plan.totals["overlapped_us"] == pytest.approx(66048 / HBM_PER_CORE * 1e6)
    assert plan.batch_size == 4


def test_linear_in_fp32_without_auto_cast() -> None:
    linear = costed(plan_for("--auto-cast none"))["aten::linear"]
    assert linear.dtype == "fp32"
    assert linear.weight_bytes == (256 * 128 + 256) * 4
    compute_us = 263168 / 23e12 * 1e6
    memory_us = (256 * 128 + 256) * 4 / HBM_PER_CORE * 1e6
    assert linear.time_us == pytest.approx(max(compute_us, memory_us))


def test_per_instance_totals() -> None:
    unpriced = plan_for("--auto-cast matmult --auto-cast-type bf16")
    assert all(i.usd_per_hour is None and i.usd_per_million is None for i in unpriced.instances)
    assert "USD" not in unpriced.to_text()
    plan = unpriced.with_prices({"ml.inf2.xlarge": 0.99, "trn1.2xlarge": 1.78})  # either naming works
    latency_s = plan.totals["latency_us"] * 1e-6
    by_name = {i.instance_type: i for i in plan.instances}
    assert set(by_name) == {
        "ml.inf2.xlarge",
        "ml.inf2.8xlarge",
        "ml.inf2.24xlarge",
        "ml.inf2.48xlarge",
        "ml.trn1.2xlarge",
        "ml.trn1.32xlarge",
    }
    cores = {"ml.inf2.xlarge": 2, "ml.inf2.24xlarge": 12, "ml.inf2.48xlarge": 24, "ml.trn1.32xlarge": 32}
    for name, count in cores.items():
        assert by_name[name].neuron_cores == count
        assert by_name[name].inferences_per_s == pytest.approx(count * 4 / latency_s)
    small = by_name["ml.inf2.xlarge"]
    assert small.fits_in_memory
    assert small.usd_per_hour == 0.99
    assert small.usd_per_million == pytest.approx(0.99 / (2 * 4 / latency_s * 3600) * 1e6)
    assert by_name["ml.trn1.2xlarge"].usd_per_hour == 1.78
    assert by_name["ml.inf2.48xlarge"].usd_per_hour is None and by_name["ml.inf2.48xlarge"].usd_per_million is None
    text = plan.to_text()
    assert "USD/h" in text and "0.99" in text


def test_a_non_positive_price_is_refused() -> None:
    plan = plan_for("--auto-cast none")
    with pytest.raises(NeuronEmuError, match="must be a positive USD/hour"):
        plan.with_prices({"ml.inf2.xlarge": 0.0})


def test_attention_splits_into_tensor_and_vector_work() -> None:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    q = torch.randn(1, 2, 8, 16)
    traced = neuron_emu.trace(attention, (q, q, q), compiler_args="--auto-cast none")
    rows = [c for c in neuron_emu.cost_plan(traced).ops if c.op == "aten::scaled_dot_product_attention"]
    assert [(r.engine, r.flops) for r in rows] == [
        ("tensor", 2 * 2 * 8 * 8 * (16 + 16)),  # QK^T and PV: 2*heads*L*S*(D+Dv)
        ("vector", 5 * 2 * 8 * 8),  # softmax over heads*L*S scores
    ]


def test_custom_ops_run_on_gpsimd(test_ops: LoadedLibrary) -> None:
    traced = neuron_emu.trace(lambda x: torch.ops.nemu_test.tcm_negate(x), torch.randn(4, 256))
    [row] = [c for c in neuron_emu.cost_plan(traced).ops if c.engine != "none"]
    assert (row.op, row.engine) == ("nemu_test::tcm_negate", "gpsimd")
    # Priced from what the kernel did while tracing: 1024 floats in one TCM block, in and out (2 transfers of
    # 4 KB), 1024 elements written; 2.426 us per transfer, 500 GB/s of DMA per NeuronCore, 16 lanes at 1.4 GHz.
    assert row.kernel is not None
    assert (row.kernel.counts["tcm_transfers"], row.kernel.counts["tcm_bytes"]) == (2, 8192)
    assert row.flops == 1024
    assert row.time_us == pytest.approx(2 * 2.426 + 8192 / 0.5e12 * 1e6 + 1024 / (16 * 1.4e9) * 1e6)


def test_plan_text_and_json_round_trip() -> None:
    plan = plan_for("--auto-cast matmult --auto-cast-type bf16")
    assert CostPlan.from_dict(json.loads(plan.to_json())) == plan
    text = plan.to_text()
    assert "ESTIMATE" in text and "not a measurement" in text
    assert "ml.inf2.xlarge" in text and "aten::linear" in text
    assert plan.estimate is True and plan.assumptions
