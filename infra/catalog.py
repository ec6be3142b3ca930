"""Instance specs and on-demand prices: `infra/data` for prices and CPU instances, neuron_emu's hardware data for
Inferentia2/Trainium (chips, vCPUs, host memory), so each fact lives in one place."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from infra.errors import InfraError

DATA_DIR = Path(__file__).resolve().parent / "data"

Accelerator = Literal["cpu", "inferentia2", "trainium"]


class CatalogError(InfraError):
    """An instance type or price table the catalog cannot use."""


@dataclass(frozen=True)
class InstanceSpec:
    name: str
    family: str
    vcpus: int
    memory_gib: int
    accelerator: Accelerator
    chips: int
    instance_storage: bool
    neuron_cores_per_chip: int
    hbm_gib_per_chip: int
    # CPU instances: the INT8 instructions their processors have (container/cpu_kind.py's names); None for Neuron.
    cpu_kind: str | None = None

    @property
    def is_neuron(self) -> bool:
        return self.accelerator != "cpu"

    @property
    def neuron_cores(self) -> int:
        return self.chips * self.neuron_cores_per_chip

    @property
    def accelerator_memory_gib(self) -> int:
        return self.chips * self.hbm_gib_per_chip

    @property
    def supports_volume_kms_key(self) -> bool:
        """SageMaker rejects a volume KMS key on instance types whose storage is local NVMe."""
        return not self.instance_storage


@dataclass(frozen=True)
class PriceTable:
    per_hour: dict[str, float]
    source: str
    region: str
    currency: str
    as_of: str

    def hourly(self, instance_type: str) -> float:
        try:
            return self.per_hour[instance_type]
        except KeyError:
            known = ", ".join(sorted(self.per_hour))
            raise CatalogError(f"no price for {instance_type!r} (price table has: {known})") from None


ACCELERATORS: dict[str, Accelerator] = {"inferentia2": "inferentia2", "trainium": "trainium"}


@cache
def instances() -> dict[str, InstanceSpec]:
    from neuron_emu.hardware import neuron_instances

    raw = json.loads((DATA_DIR / "instances.json").read_text())
    neuron = neuron_instances()
    specs: dict[str, InstanceSpec] = {}
    for name, spec in raw["instances"].items():
        if spec.get("neuron"):
            if name not in neuron:
                raise CatalogError(f"{name} is a Neuron instance type that neuron_emu's hardware data does not list")
            hw = neuron[name]
            specs[name] = InstanceSpec(
                name=name,
                family=hw.family,
                vcpus=hw.vcpus,
                memory_gib=hw.host_memory_gib,
                accelerator=ACCELERATORS[hw.chip.name],
                chips=hw.chips,
                instance_storage=spec["instance_storage"],
                neuron_cores_per_chip=hw.chip.cores_per_chip,
                hbm_gib_per_chip=hw.chip.hbm_gib,
            )
        else:
            specs[name] = InstanceSpec(
                name=name,
                family=spec["family"],
                vcpus=spec["vcpus"],
                memory_gib=spec["memory_gib"],
                accelerator="cpu",
                chips=0,
                instance_storage=spec["instance_storage"],
                neuron_cores_per_chip=0,
                hbm_gib_per_chip=0,
                cpu_kind=spec.get("cpu_kind"),
            )
    return specs


@dataclass(frozen=True)
class Int8Preference:
    cpu_kind: str
    runtime: str
    evidence: str


@cache
def int8_runtime_preferences() -> dict[str, Int8Preference]:
    """The INT8 runtime measured fastest on each CPU kind (infra/data/cpu_kinds.json), with the evidence."""
    from container.cpu_kind import CPU_KINDS

    raw = json.loads((DATA_DIR / "cpu_kinds.json").read_text())["kinds"]
    if set(raw) != set(CPU_KINDS):
        raise CatalogError(f"cpu_kinds.json must name exactly the CPU kinds {list(CPU_KINDS)}; it names {sorted(raw)}")
    return {kind: Int8Preference(kind, entry["int8_runtime"], entry["evidence"]) for kind, entry in raw.items()}


def instance(instance_type: str) -> InstanceSpec:
    try:
        return instances()[instance_type]
    except KeyError:
        known = ", ".join(sorted(instances()))
        raise CatalogError(f"unknown instance type {instance_type!r} (known: {known})") from None


def load_prices(path: Path | None = None) -> PriceTable:
    """Load a price table; the bundled one unless `path` names another file of the same shape."""
    path = path or DATA_DIR / "prices.json"
    try:
        raw = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise CatalogError(f"price table {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise CatalogError(f"price table {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        per_hour = {str(k): float(v) for k, v in raw["per_hour"].items()}
        table = PriceTable(
            per_hour=per_hour,
            source=str(raw["source"]),
            region=str(raw["region"]),
            currency=str(raw["currency"]),
            as_of=str(raw["as_of"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CatalogError(f"price table {path} lacks a valid field: {exc}") from None
    bad = [name for name, price in per_hour.items() if not price > 0]
    if bad:
        raise CatalogError(f"price table {path} has non-positive prices for {', '.join(bad)}")
    return table
