"""A cost plan as text: the costliest ops, per-engine totals and the per-instance table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from neuron_emu.cost.records import InstanceCost, OpCost
from neuron_emu.custom_op.profile import CoreCounts

MAX_OP_ROWS = 40


class PlanView(Protocol):
    """What the text report reads of a plan (neuron_emu.cost.plan.CostPlan has it all)."""

    @property
    def core(self) -> str: ...
    @property
    def compiler_args(self) -> str: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def inputs(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def ops(self) -> Sequence[OpCost]: ...
    @property
    def totals(self) -> Mapping[str, Any]: ...
    @property
    def instances(self) -> Sequence[InstanceCost]: ...
    @property
    def unsupported(self) -> Sequence[Mapping[str, str]]: ...
    @property
    def assumptions(self) -> Sequence[str]: ...
    @property
    def kernel_constants(self) -> Mapping[str, float]: ...


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def render(plan: PlanView) -> str:
    lines = [
        f"neuron_emu cost plan for {plan.core} - an ESTIMATE from a roofline model, not a measurement",
        f"compiler args: {plan.compiler_args}",
        "inputs: " + ", ".join(f"{i['dtype']}{i['shape']}" for i in plan.inputs) + f" (batch {plan.batch_size})",
        "",
    ]
    costly = sorted((c for c in plan.ops if c.engine != "none"), key=lambda c: c.time_us, reverse=True)
    shown = costly[:MAX_OP_ROWS]
    lines.append(f"{'#':>4}  {'op':<36} {'engine':<7} {'dtype':<9} {'FLOPs':>11} {'HBM':>10} {'time':>10}  bound")
    for c in sorted(shown, key=lambda c: c.index):
        lines.append(
            f"{c.index:>4}  {c.op[:36]:<36} {c.engine:<7} {c.dtype:<9} {_si(c.flops, 'F'):>11} "
            f"{_si(c.hbm_bytes, 'B'):>10} {c.time_us:>8.2f}us  {c.bound}"
        )
    hidden = len(costly) - len(shown)
    free = sum(1 for c in plan.ops if c.engine == "none")
    if hidden > 0:
        lines.append(f"      ... {hidden} cheaper ops not shown")
    lines.append(f"      ({free} layout-only or auto-cast ops cost nothing)")
    lines += _kernel_rows(plan.ops, plan.kernel_constants)
    totals = plan.totals
    lines += ["", "per engine:"]
    for engine, entry in sorted(totals["by_engine"].items()):
        flops = _si(entry["flops"], "FLOP")
        lines.append(f"  {engine:<7} {int(entry['ops']):>5} ops  {flops:>12}  {entry['time_us']:>10.2f} us")
    lines += [
        "",
        f"per inference: {_si(totals['flops'], 'FLOP')}, {_si(totals['hbm_bytes'], 'B')} of HBM traffic "
        f"({_si(totals['weight_bytes'], 'B')} weights); latency {totals['latency_us']:.1f} us serial, "
        f"{totals['overlapped_us']:.1f} us if engines overlapped perfectly",
        "",
    ]
    lines += _instance_rows(plan.instances)
    if plan.unsupported:
        lines += ["", "unsupported ops:"]
        lines += [f"  {u['kind']}: {u['reason']} ({u['call']})" for u in plan.unsupported]
    lines += ["", "assumptions:"] + [f"  - {a}" for a in plan.assumptions]
    return "\n".join(lines) + "\n"


def _instance_rows(instances: Sequence[InstanceCost]) -> list[str]:
    """The per-instance table; the $ columns only when the plan was given prices."""
    priced = any(i.usd_per_hour is not None for i in instances)
    header = f"{'instance':<18} {'cores':>5} {'latency':>10} {'inferences/s':>13} {'fits':>5}"
    rows = [header + (f" {'USD/h':>7} {'USD/1M inf':>11}" if priced else "")]
    for i in instances:
        row = (
            f"{i.instance_type:<18} {i.neuron_cores:>5} {i.latency_ms:>8.3f}ms {i.inferences_per_s:>13.0f} "
            f"{'yes' if i.fits_in_memory else 'NO':>5}"
        )
        if priced:
            price = f"{i.usd_per_hour:.2f}" if i.usd_per_hour is not None else "n/a"
            per_million = f"{i.usd_per_million:.4f}" if i.usd_per_million is not None else "n/a"
            row += f" {price:>7} {per_million:>11}"
        rows.append(row)
    return rows


def _kernel_rows(ops: Sequence[OpCost], constants: Mapping[str, float]) -> list[str]:
    """Where each profiled custom-op call's time goes: its slowest GPSIMD core's counts x the constants."""
    profiled = [c for c in ops if c.kernel is not None]
    if not profiled:
        return []
    lines = [
        "",
        "custom-op kernels (the emulator's access profile of the slowest GPSIMD core x the constants below):",
        f"{'#':>4}  {'op':<30} {'cores':>5} {'HBM acc.':>9} {'DMA xfers':>9} {'DMA bytes':>10} {'computed':>9} "
        f"{'HBM-acc us':>10} {'DMA us':>9} {'compute us':>10} {'total us':>10}",
    ]
    for c in profiled:
        k = c.kernel
        assert k is not None
        n = CoreCounts.from_dict(k.counts)
        lines.append(
            f"{c.index:>4}  {c.op[:30]:<30} {k.cores:>5} {n.hbm_accesses:>9} {n.dma_transfers:>9} "
            f"{_si(n.dma_bytes, 'B'):>10} {n.elements_computed:>9} {k.hbm_access_us:>10.2f} {k.dma_us:>9.2f} "
            f"{k.compute_us:>10.2f} {k.time_us:>10.2f}"
        )
        if n.data_ptr_calls:
            lines.append(f"      (#{c.index} read raw data_ptr(): accesses through it are not counted)")
    if constants:
        lines.append(
            f"      constants: {constants['hbm_access_ns']:.1f} ns per element access (derived), "
            f"{constants['dma_transfer_us']:.3f} us per DMA transfer (derived) + bytes at "
            f"{_si(constants['dma_bytes_per_s'], 'B/s')} shared by the cores moving data, "
            f"{_si(constants['compute_elements_per_s'], 'elements/s')} per core (assumed clock)"
        )
    return lines
