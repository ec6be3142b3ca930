"""Neuron instance types and their chips, from neuron_emu's own data file (`data/neuron_instances.json`).

neuron_emu needs no other package of the project: these are the hardware facts the cost model sizes a plan
with. Prices are not hardware facts; functions that print $ figures take them as a parameter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from neuron_emu.errors import NeuronEmuError
from neuron_emu.paths import DATA_DIR

GIB = 1024**3
INSTANCES_FILE = "neuron_instances.json"


@dataclass(frozen=True)
class ChipSpec:
    name: str
    neuron_core: str
    cores_per_chip: int
    hbm_gib: int
    hbm_gib_per_s: float
    dma_tb_per_s: float

    @property
    def hbm_bytes_per_s(self) -> float:
        return self.hbm_gib_per_s * GIB

    @property
    def dma_bytes_per_s(self) -> float:
        return self.dma_tb_per_s * 1e12


@dataclass(frozen=True)
class NeuronInstance:
    name: str
    family: str
    chip: ChipSpec
    chips: int
    vcpus: int
    host_memory_gib: int

    @property
    def neuron_cores(self) -> int:
        return self.chips * self.chip.cores_per_chip

    @property
    def hbm_gib(self) -> int:
        """Device memory of the whole instance (all chips)."""
        return self.chips * self.chip.hbm_gib


def _load() -> dict[str, object]:
    raw: dict[str, object] = json.loads((DATA_DIR / INSTANCES_FILE).read_text())
    return raw


@cache
def chips() -> dict[str, ChipSpec]:
    """Neuron chips by name (inferentia2, trainium)."""
    raw = _load()["chips"]
    assert isinstance(raw, dict)
    return {
        name: ChipSpec(
            name=name,
            neuron_core=str(spec["neuron_core"]),
            cores_per_chip=int(spec["cores_per_chip"]),
            hbm_gib=int(spec["hbm_gib"]),
            hbm_gib_per_s=float(spec["hbm_gib_per_s"]),
            dma_tb_per_s=float(spec["dma_tb_per_s"]),
        )
        for name, spec in raw.items()
    }


@cache
def neuron_instances() -> dict[str, NeuronInstance]:
    """Neuron instance types by (SageMaker hosting) name, in the data file's order."""
    raw = _load()["instances"]
    assert isinstance(raw, dict)
    known = chips()
    return {
        name: NeuronInstance(
            name=name,
            family=str(spec["family"]),
            chip=known[str(spec["chip"])],
            chips=int(spec["chips"]),
            vcpus=int(spec["vcpus"]),
            host_memory_gib=int(spec["host_memory_gib"]),
        )
        for name, spec in raw.items()
    }


@cache
def tensor_parallel_degrees(family: str) -> tuple[int, ...]:
    """The tensor-parallel degrees a decoder may be compiled for on an instance family (inf2, trn1)."""
    raw = _load()["tensor_parallel_degrees"]
    assert isinstance(raw, dict)
    if family not in raw:
        raise NeuronEmuError(f"no tensor-parallel degrees are known for instance family {family!r} (inf2, trn1)")
    return tuple(int(d) for d in raw[family])


def target_instances(target: str | None) -> tuple[str, ...]:
    """Instance types a `--target` compiler flag allows (inf2, trn1, trn1n), or all of them without one."""
    names = list(neuron_instances())
    if target is None:
        return tuple(names)
    family = "trn1" if target.startswith("trn1") else target
    return tuple(name for name in names if neuron_instances()[name].family == family)


def price_for(prices: Mapping[str, float] | None, instance_type: str) -> float | None:
    """The USD/hour `prices` gives `instance_type`, whether keyed `ml.inf2.xlarge` or `inf2.xlarge`."""
    if prices is None:
        return None
    bare = instance_type.removeprefix("ml.")
    for key in (instance_type, bare, f"ml.{bare}"):
        if key in prices:
            value = float(prices[key])
            if not value > 0:
                raise NeuronEmuError(f"the price of {key} must be a positive USD/hour figure, got {prices[key]!r}")
            return value
    return None
