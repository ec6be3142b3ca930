"""The rows of a cost plan: one op's estimate and one instance type's totals (plain data, no logic)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KernelCost:
    """Where one custom-op call's GPSIMD time goes, priced from the emulator's access profile.

    The op takes its slowest core's time (cores run in parallel); `counts` is that core's profile and the
    three times are its counts times the plan's kernel constants. `all_cores` sums the profile over cores.
    """

    cores: int
    critical_core: int
    dma_sharing_cores: int  # cores of the call that moved data: they share the NeuronCore's DMA bandwidth
    counts: dict[str, int]
    all_cores: dict[str, int]
    hbm_access_us: float
    dma_us: float
    compute_us: float
    time_us: float

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> KernelCost:
        return cls(**{**raw, "counts": dict(raw["counts"]), "all_cores": dict(raw["all_cores"])})


@dataclass(frozen=True)
class OpCost:
    index: int
    op: str
    engine: str
    dtype: str
    flops: float
    weight_bytes: float
    activation_bytes: float
    hbm_bytes: float
    time_us: float
    bound: str
    note: str
    source: str
    kernel: KernelCost | None = None  # custom ops whose call the emulator profiled

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> OpCost:
        kernel = raw.get("kernel")
        return cls(**{**raw, "kernel": KernelCost.from_dict(kernel) if kernel else None})


@dataclass(frozen=True)
class InstanceCost:
    instance_type: str
    neuron_cores: int
    chips: int
    latency_ms: float
    inferences_per_s: float
    fits_in_memory: bool
    usd_per_hour: float | None
    usd_per_million: float | None
