"""The rows of a cost plan: one op's estimate and one instance type's totals (plain data, no logic)."""

from __future__ import annotations

from dataclasses import dataclass


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
