"""Each Neuron instance type's NeuronCores as the estimate sees them: how many, their HBM share and bandwidth, the
links a ring crosses and the tensor engine's peak per dtype (from neuron_emu/data, through neuron_emu.hardware)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from neuron_emu.cost.core_spec import neuroncore_v2
from neuron_emu.hardware import GIB, neuron_instances
from neuron_emu.llm.cost.constants import DTYPE_BYTES, CostError
from neuron_emu.parallel.cost import interconnect


@dataclass(frozen=True)
class Hardware:
    """One Neuron instance type's NeuronCores as this model sees them."""

    instance_type: str
    family: str
    cores: int
    cores_per_chip: int
    hbm_bytes_per_core: float
    hbm_bytes_per_s_per_core: float
    intra_chip_bytes_per_s: float
    neuronlink_bytes_per_s: float | None
    tensor_flops: Mapping[str, float]  # dtype -> FLOP/s of one core's tensor engine

    def peak(self, dtype: str) -> float:
        return self.tensor_flops.get(dtype, self.tensor_flops["fp32"])

    def link_bytes_per_s(self, tp: int) -> float:
        """The slowest link a ring over `tp` cores crosses (cores fill a chip first)."""
        if math.ceil(tp / self.cores_per_chip) <= 1 or self.neuronlink_bytes_per_s is None:
            return self.intra_chip_bytes_per_s
        return min(self.intra_chip_bytes_per_s, self.neuronlink_bytes_per_s)


@cache
def neuron_hardware() -> dict[str, Hardware]:
    """Every Neuron instance type of neuron_emu/data, with its cores, HBM, links and tensor-engine peaks."""
    core = neuroncore_v2()
    links = interconnect()
    out: dict[str, Hardware] = {}
    for name, instance in neuron_instances().items():
        link = links[name]
        out[name] = Hardware(
            instance_type=name,
            family=instance.family,
            cores=instance.neuron_cores,
            cores_per_chip=instance.chip.cores_per_chip,
            hbm_bytes_per_core=instance.chip.hbm_gib * GIB / instance.chip.cores_per_chip,
            hbm_bytes_per_s_per_core=instance.chip.hbm_bytes_per_s / instance.chip.cores_per_chip,
            intra_chip_bytes_per_s=link.intra_chip_bytes_per_s,
            neuronlink_bytes_per_s=link.neuronlink_bytes_per_s,
            tensor_flops={dtype: core.tensor_peak(dtype) for dtype in DTYPE_BYTES},
        )
    return out


def hardware(instance_type: str) -> Hardware:
    known = neuron_hardware()
    name = instance_type if instance_type in known else f"ml.{instance_type.removeprefix('ml.')}"
    if name not in known:
        raise CostError(f"unknown Neuron instance type {instance_type!r} (known: {', '.join(known)})")
    return known[name]
