"""The custom-op kernel cost model: a call's access profile (neuron_emu.custom_op.profile) times constants.

Per GPSIMD core c of a call (a core runs straight-line C, so it waits for each access in turn):

    hbm_access = element accesses to NeuronCore memory x hbm_access_ns
    dma        = transfers x dma_transfer_us + bytes / (one NeuronCore's DMA bandwidth / cores moving data)
    compute    = elements computed / (GPSIMD fp32 lanes x clock)

and the call takes its slowest core's hbm_access + dma + compute. The constants come from neuron_emu/data
(gpsimd_kernels.json, neuron_instances.json, neuroncore_v2.json), with how each was obtained. An estimate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from typing import Any

from neuron_emu.cost.core_spec import CoreSpec, neuroncore_v2
from neuron_emu.cost.graph import GraphOp
from neuron_emu.cost.records import KernelCost
from neuron_emu.cost.rules import split_kind
from neuron_emu.custom_op.profile import CallProfile, CoreCounts
from neuron_emu.paths import DATA_DIR

KERNELS_FILE = "gpsimd_kernels.json"


@dataclass(frozen=True)
class KernelConstants:
    hbm_access_ns: float  # one element accessed in NeuronCore memory (derived, see gpsimd_kernels.json)
    dma_transfer_us: float  # fixed cost of one DMA transfer to or from TCM (derived)
    dma_bytes_per_s: float  # one NeuronCore's share of its chip's DMA bandwidth (published chip figure / cores)
    compute_elements_per_s: float  # one GPSIMD core: fp32 lanes (published 512 bits) x clock (assumed)

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def calibration_constants(calibration: Mapping[str, Any], core: CoreSpec) -> tuple[float, float]:
    """(hbm_access_ns, dma_transfer_us) derived from the tutorial's published throughputs (the data file's
    'calibration' block lists the assumptions; this is its 'derivation', step by step)."""
    rate = calibration["inferences_per_s"]
    t_accessor, t_tcm, t_multicore = (1.0 / float(rate[k]) for k in ("accessor", "tcm", "multicore_tcm"))
    cores = core.gpsimd_cores
    relu_tcm = (t_tcm - t_multicore) * cores / (cores - 1)
    rest = t_tcm - relu_tcm
    relu_accessor = t_accessor - rest
    batch = int(calibration["batch_size"])
    widths = [int(w) for w in calibration["relu_widths"]]
    elements = batch * sum(widths)
    compute_s = elements / core.gpsimd_core_ops_per_s
    accesses = float(calibration["accessor_accesses_per_element"]) * elements
    hbm_access_ns = (relu_accessor - compute_s) / accesses * 1e9
    buffer = int(calibration["tcm_buffer_elements"])
    transfers = sum(2 * math.ceil(batch * w / buffer) for w in widths)
    moved = 2 * elements * int(calibration["element_bytes"])
    dma_transfer_us = (relu_tcm - compute_s - moved / core.dma_bytes_per_s_per_core) / transfers * 1e6
    return hbm_access_ns, dma_transfer_us


@cache
def _raw() -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((DATA_DIR / KERNELS_FILE).read_text())
    return raw


def kernel_calibration() -> dict[str, Any]:
    """The data file's calibration block (published tutorial figures and the assumptions drawn from them)."""
    return dict(_raw()["calibration"])


def kernel_constants(core: CoreSpec | None = None) -> KernelConstants:
    spec = core or neuroncore_v2()
    raw = _raw()
    return KernelConstants(
        hbm_access_ns=float(raw["hbm_access_ns"]),
        dma_transfer_us=float(raw["dma_transfer_us"]),
        dma_bytes_per_s=spec.dma_bytes_per_s_per_core,
        compute_elements_per_s=spec.gpsimd_core_ops_per_s,
    )


@dataclass(frozen=True)
class CoreTime:
    hbm_access_us: float
    dma_us: float
    compute_us: float

    @property
    def total_us(self) -> float:
        return self.hbm_access_us + self.dma_us + self.compute_us


def core_time(counts: CoreCounts, constants: KernelConstants, dma_sharing_cores: int = 1) -> CoreTime:
    """One core's time for its counts; `dma_sharing_cores` cores move data at once and split the bandwidth."""
    bandwidth = constants.dma_bytes_per_s / max(1, dma_sharing_cores)
    return CoreTime(
        hbm_access_us=counts.hbm_accesses * constants.hbm_access_ns * 1e-3,
        dma_us=counts.dma_transfers * constants.dma_transfer_us + counts.dma_bytes / bandwidth * 1e6,
        compute_us=counts.elements_computed / constants.compute_elements_per_s * 1e6,
    )


def kernel_cost(call: CallProfile, constants: KernelConstants) -> KernelCost:
    """The call's time: its slowest core's (the cores run in parallel), with where that time goes."""
    sharing = max(1, sum(1 for c in call.cores if c.dma_bytes > 0))
    times = [core_time(c, constants, sharing) for c in call.cores]
    critical = max(range(len(times)), key=lambda i: times[i].total_us)
    slowest = times[critical]
    return KernelCost(
        cores=len(call.cores),
        critical_core=critical,
        dma_sharing_cores=sharing,
        counts=call.cores[critical].to_dict(),
        all_cores=call.total.to_dict(),
        hbm_access_us=slowest.hbm_access_us,
        dma_us=slowest.dma_us,
        compute_us=slowest.compute_us,
        time_us=slowest.total_us,
    )


def dominant(cost: KernelCost) -> str:
    """Which of the three parts the call's time mostly goes to."""
    parts = {"hbm-access": cost.hbm_access_us, "dma": cost.dma_us, "compute": cost.compute_us}
    return max(parts, key=lambda k: parts[k])


def match_calls(
    ops: Sequence[GraphOp], namespaces: Mapping[str, bool], calls: Sequence[CallProfile]
) -> dict[int, CallProfile]:
    """Pair the graph's custom-op nodes with the calls recorded while tracing it (both in execution order).

    Returns {index in ops: call}; empty when the two sequences disagree (then no op gets a profile)."""
    positions = [i for i, op in enumerate(ops) if split_kind(op.kind)[0] in namespaces and not op.autocast]
    recorded = [c for c in calls if c.op.partition("::")[0] in namespaces]
    names = ["::".join(split_kind(ops[i].kind)) for i in positions]
    if names != [c.op for c in recorded]:
        return {}
    return dict(zip(positions, recorded, strict=True))
