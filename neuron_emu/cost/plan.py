"""Per-op cost plans: a roofline time for every op of a traced graph, and totals per Neuron instance type.

It is an estimate, not a measurement; the model and its assumptions are listed in ASSUMPTIONS and in
neuron_emu/README.md ("Cost model").
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from neuron_emu.compiler_args import CompilerOptions
from neuron_emu.cost.core_spec import CoreSpec
from neuron_emu.cost.graph import GraphOp, TensorMeta
from neuron_emu.cost.kernels import KernelConstants, dominant, kernel_constants, kernel_cost
from neuron_emu.cost.records import InstanceCost, KernelCost, OpCost
from neuron_emu.cost.report import render
from neuron_emu.cost.rules import classify, split_kind, tensor_engine_dtype, traffic, work
from neuron_emu.custom_op.profile import CallProfile, CoreCounts
from neuron_emu.hardware import GIB, NeuronInstance, neuron_instances, price_for

__all__ = [
    "ASSUMPTIONS",
    "CostPlan",
    "InstanceCost",
    "KernelCost",
    "OpCost",
    "build_plan",
    "instance_costs",
    "op_costs",
    "totals",
]

Prices = Mapping[str, float]  # instance type -> on-demand USD per hour

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")
ASSUMPTIONS = (
    "Estimate only: a roofline model from published NeuronCore-v2 peak figures, not a measurement.",
    "Each op runs alone: time = max(FLOPs / engine peak, HBM bytes / HBM bandwidth); latency is the "
    "serial sum (engines overlapping perfectly would give the 'overlapped' lower bound).",
    "Tensor engine at the auto-cast type's peak (fp32 operands without auto-cast run at the fp32 peak); "
    "vector and scalar engines at their peaks whatever the dtype.",
    "Weights stream from HBM on every inference (auto-cast stores fp32 weights in the auto-cast type); "
    "activations stay in the 24 MiB SBUF unless one op's activations exceed it.",
    "HBM bandwidth per core is the chip's bandwidth shared by its cores (neuron_emu/data/neuron_instances.json).",
    "FLOPs: 2*M*N*K per matmul; 1 per element for element-wise and activation ops; softmax 5, layer norm "
    "8 per element; reductions count input elements.",
    "Custom C++ ops: priced from the access profile the emulator recorded while tracing (per GPSIMD core: "
    "element accesses to NeuronCore memory x a per-access latency, DMA transfers x a per-transfer cost plus "
    "bytes at the DMA bandwidth, elements computed at 16 fp32 lanes x an assumed 1.4 GHz; the slowest core "
    "sets the time); the latency and per-transfer figures are derived from the Neuron custom-op tutorial's "
    "published throughputs (neuron_emu/data/gpsimd_kernels.json). Without a profile: one operation per input "
    "and output element on 1 GPSIMD core (8 with multicore=True). Gathers (embedding, index_select) move only "
    "the rows they read.",
    "Layout ops (view, permute, slice...) are free; copies (cat, pad, contiguous) cost their bytes at HBM bandwidth.",
    "Not modelled: host-device transfer of inputs and outputs, runtime launch overhead, collective ops, "
    "the host CPU (tokenization) and sharding one model over cores: one model replica per NeuronCore.",
)


@dataclass(frozen=True)
class CostPlan:
    core: str
    compiler_args: str
    auto_cast: str
    auto_cast_type: str
    batch_size: int
    inputs: list[dict[str, Any]]
    ops: list[OpCost]
    totals: dict[str, Any]
    instances: list[InstanceCost]
    unsupported: list[dict[str, str]]
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))
    estimate: bool = True
    kernel_constants: dict[str, float] = field(default_factory=dict)  # what profiled custom ops were priced with

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CostPlan:
        return cls(
            core=raw["core"],
            compiler_args=raw["compiler_args"],
            auto_cast=raw["auto_cast"],
            auto_cast_type=raw["auto_cast_type"],
            batch_size=int(raw["batch_size"]),
            inputs=list(raw["inputs"]),
            ops=[OpCost.from_dict(op) for op in raw["ops"]],
            totals=dict(raw["totals"]),
            instances=[InstanceCost(**i) for i in raw["instances"]],
            unsupported=list(raw["unsupported"]),
            assumptions=list(raw.get("assumptions", ASSUMPTIONS)),
            estimate=bool(raw.get("estimate", True)),
            kernel_constants={k: float(v) for k, v in raw.get("kernel_constants", {}).items()},
        )

    def to_text(self) -> str:
        """The plan as text; $ columns only when the plan carries prices (see with_prices)."""
        return render(self)

    def with_prices(self, prices: Prices | None) -> CostPlan:
        """This plan with each instance's USD/hour and USD per million inferences from `prices` (None: no $)."""
        return replace(self, instances=[_priced(i, prices) for i in self.instances])


def _profiled_custom_op(
    index: int, op: GraphOp, note: str, dtype: str, traffic_bytes: tuple[float, float], kernel: KernelCost
) -> OpCost:
    all_cores = CoreCounts.from_dict(kernel.all_cores)
    return OpCost(
        index=index,
        op=op.kind,
        engine="gpsimd",
        dtype=dtype,
        flops=float(all_cores.elements_computed),  # one operation per element computed, on all cores
        weight_bytes=traffic_bytes[0],
        activation_bytes=traffic_bytes[1],
        hbm_bytes=float(all_cores.dma_bytes),  # block transfers; element accesses are counted, not sized
        time_us=kernel.time_us,
        bound=dominant(kernel),
        note=f"{note}; priced from the emulator's access profile",
        source=op.source,
        kernel=kernel,
    )


def op_costs(
    ops: Sequence[GraphOp],
    options: CompilerOptions,
    core: CoreSpec,
    custom_namespaces: Mapping[str, bool],
    kernel_profiles: Mapping[int, CallProfile] | None = None,
    constants: KernelConstants | None = None,
) -> tuple[list[OpCost], list[dict[str, str]]]:
    """One row per op (attention gives two). `kernel_profiles` ({index in ops: recorded call}) prices those
    custom ops from their access profile with `constants` (default: neuron_emu/data's)."""
    profiles = kernel_profiles or {}
    kernel_prices = constants or (kernel_constants(core) if profiles else None)
    costs: list[OpCost] = []
    unsupported: list[dict[str, str]] = []
    bandwidth = core.hbm_bytes_per_s_per_core
    for position_in_graph, op in enumerate(ops):
        decision = classify(op, custom_namespaces)
        if decision.unsupported:
            unsupported.append(
                {"kind": op.kind, "reason": decision.unsupported, "call": op.source, "opGraph": op.graph_text}
            )
            continue
        weights, activations = traffic(op, decision.engine, options)
        call = profiles.get(position_in_graph)
        if call is not None and kernel_prices is not None:
            kernel = kernel_cost(call, kernel_prices)
            costs.append(
                _profiled_custom_op(
                    len(costs), op, decision.note, _dtype_label(op, options), (weights, activations), kernel
                )
            )
            continue
        spills = activations > core.sbuf_bytes
        for position, part in enumerate(work(op, decision.engine)):
            engine = part.engine
            dtype = tensor_engine_dtype(op, options) if engine == "tensor" else _dtype_label(op, options)
            if engine == "tensor":
                compute_s = part.flops / core.tensor_peak(dtype)
            elif engine == "vector":
                compute_s = part.flops / (core.vector_tflops * 1e12)
            elif engine == "scalar":
                compute_s = part.flops / (core.scalar_tflops * 1e12)
            elif engine == "gpsimd":
                compute_s = part.flops / (core.gpsimd_core_ops_per_s * decision.gpsimd_cores)
            else:
                compute_s = 0.0
            # Traffic is charged once per op; layout-only ops move nothing.
            w, a = (weights, activations) if position == 0 and engine != "none" else (0.0, 0.0)
            hbm = a if engine == "dma" else w + (a if spills else 0.0)
            memory_s = hbm / bandwidth
            time_s = max(compute_s, memory_s)
            bound = "-" if engine == "none" else ("compute" if compute_s >= memory_s else "memory")
            custom = engine == "gpsimd" and split_kind(op.kind)[0] in custom_namespaces
            unprofiled = "no access profile: one operation per input and output element" if custom else ""
            note = "; ".join(n for n in (decision.note, part.label, unprofiled) if n)
            costs.append(
                OpCost(
                    index=len(costs),
                    op=op.kind,
                    engine=engine,
                    dtype=dtype,
                    flops=part.flops,
                    weight_bytes=w,
                    activation_bytes=a,
                    hbm_bytes=hbm,
                    time_us=time_s * 1e6,
                    bound=bound,
                    note=note,
                    source=op.source,
                )
            )
    return costs, unsupported


def _dtype_label(op: GraphOp, options: CompilerOptions) -> str:
    outs = [o for o in op.outputs if o]
    dtype = outs[0].dtype if outs else "float32"
    if dtype == "float32" and options.casts_all:
        return options.auto_cast_type
    return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)


def totals(costs: Sequence[OpCost], core: CoreSpec) -> dict[str, Any]:
    by_engine: dict[str, dict[str, float]] = {}
    for cost in costs:
        if cost.engine == "none":
            continue
        entry = by_engine.setdefault(cost.engine, {"ops": 0, "flops": 0.0, "time_us": 0.0})
        entry["ops"] += 1
        entry["flops"] += cost.flops
        entry["time_us"] += cost.time_us
    latency_us = sum(c.time_us for c in costs)
    hbm_bytes = sum(c.hbm_bytes for c in costs)
    memory_us = hbm_bytes / core.hbm_bytes_per_s_per_core * 1e6
    busiest = max((e["time_us"] for e in by_engine.values()), default=0.0)
    return {
        "flops": sum(c.flops for c in costs),
        "hbm_bytes": hbm_bytes,
        "weight_bytes": sum(c.weight_bytes for c in costs),
        "latency_us": latency_us,
        "overlapped_us": max(busiest, memory_us),
        "by_engine": by_engine,
    }


def _priced(row: InstanceCost, prices: Prices | None) -> InstanceCost:
    price = price_for(prices, row.instance_type)
    per_second = row.inferences_per_s
    per_million = price / (per_second * 3600.0) * 1e6 if price is not None and per_second > 0 else None
    return replace(row, usd_per_hour=price, usd_per_million=per_million)


def instance_costs(
    latency_us: float,
    batch_size: int,
    weight_bytes: float,
    prices: Prices | None = None,
    instances: Mapping[str, NeuronInstance] | None = None,
) -> list[InstanceCost]:
    """One row per Neuron instance type (default: neuron_emu's data file): one model replica per NeuronCore.

    `prices` (instance type -> USD/hour) adds the $ columns; None leaves them empty.
    """
    out: list[InstanceCost] = []
    for spec in (neuron_instances() if instances is None else instances).values():
        cores = spec.neuron_cores
        per_core_memory = spec.hbm_gib * GIB / max(1, cores)
        per_second = cores * batch_size / (latency_us * 1e-6) if latency_us > 0 else 0.0
        row = InstanceCost(
            instance_type=spec.name,
            neuron_cores=cores,
            chips=spec.chips,
            latency_ms=latency_us / 1000.0,
            inferences_per_s=per_second,
            fits_in_memory=weight_bytes <= per_core_memory,
            usd_per_hour=None,
            usd_per_million=None,
        )
        out.append(_priced(row, prices))
    return out


def _input_summary(inputs: Sequence[TensorMeta | None]) -> list[dict[str, Any]]:
    return [{"shape": list(m.shape), "dtype": m.dtype} for m in inputs if m is not None]


def build_plan(
    ops: Sequence[GraphOp],
    inputs: Sequence[TensorMeta | None],
    options: CompilerOptions,
    core: CoreSpec,
    custom_namespaces: Mapping[str, bool],
    prices: Prices | None = None,
    kernel_profiles: Mapping[int, CallProfile] | None = None,
) -> CostPlan:
    """The plan of a traced graph; `kernel_profiles` ({index in ops: call recorded while tracing}) prices
    custom ops from what their kernels did (see neuron_emu.cost.kernels)."""
    constants = kernel_constants(core) if kernel_profiles else None
    costs, unsupported = op_costs(ops, options, core, custom_namespaces, kernel_profiles, constants)
    summary = totals(costs, core)
    batch = inputs[0].shape[0] if inputs and inputs[0] is not None and inputs[0].shape else 1
    return CostPlan(
        core=core.name,
        compiler_args=options.text(),
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        batch_size=int(batch),
        inputs=_input_summary(inputs),
        ops=costs,
        totals=summary,
        instances=instance_costs(summary["latency_us"], int(batch), summary["weight_bytes"], prices),
        unsupported=unsupported,
        kernel_constants=constants.to_dict() if constants is not None else {},
    )
