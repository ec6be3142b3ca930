"""The figures the estimate rests on: its constants as neuron_emu/data/llm_cost.json states and sources them, the
dtypes and batch sizes it knows, and the error it raises for a question it cannot answer."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from neuron_emu.errors import NeuronEmuError
from neuron_emu.paths import DATA_DIR

COST_FILE = DATA_DIR / "llm_cost.json"
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class CostError(NeuronEmuError, ValueError):
    """A cost question the model cannot answer (unknown dtype or instance, a sequence length out of range)."""


@dataclass(frozen=True)
class Constants:
    """The figures the estimate depends on (neuron_emu/data/llm_cost.json says where each comes from)."""

    hbm_efficiency: float
    collective_hop_us: float
    compute_efficiency: float
    reserve_gib_per_core: float
    cpu_bytes_per_s_per_vcpu: float
    cpu_flops_per_s_per_vcpu: float
    cpu_reserve_gib: float
    fitted_to: tuple[str, ...] = ()
    cpu_fitted_to: tuple[str, ...] = ()

    def with_values(self, **values: float) -> Constants:
        unknown = set(values) - {f for f in self.__dataclass_fields__ if not f.endswith("fitted_to")}
        if unknown:
            raise TypeError(f"not numeric constants: {', '.join(sorted(unknown))}")
        return replace(self, **values)  # type: ignore[arg-type]


def _value(raw: Mapping[str, Any], name: str) -> float:
    try:
        value = float(raw[name]["value"])
    except (KeyError, TypeError, ValueError):
        raise CostError(f"{COST_FILE.name} has no numeric constants.{name}.value") from None
    if not value >= 0:
        raise CostError(f"{COST_FILE.name}: constants.{name} must not be negative, got {value}")
    return value


def parse_constants(raw: Mapping[str, Any]) -> Constants:
    """Constants from llm_cost.json's layout (its "constants" object)."""
    constants = raw["constants"]
    return Constants(
        hbm_efficiency=_value(constants, "hbm_efficiency"),
        collective_hop_us=_value(constants, "collective_hop_us"),
        compute_efficiency=_value(constants, "compute_efficiency"),
        reserve_gib_per_core=_value(constants, "reserve_gib_per_core"),
        cpu_bytes_per_s_per_vcpu=_value(constants, "cpu_bytes_per_s_per_vcpu"),
        cpu_flops_per_s_per_vcpu=_value(constants, "cpu_flops_per_s_per_vcpu"),
        cpu_reserve_gib=_value(constants, "cpu_reserve_gib"),
        fitted_to=tuple(constants["hbm_efficiency"].get("fitted_to", ())),
        cpu_fitted_to=tuple(constants["cpu_bytes_per_s_per_vcpu"].get("fitted_to", ())),
    )


@cache
def cost_data(path: Path = COST_FILE) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(Path(path).read_text())
    return data


def load_constants(path: Path = COST_FILE) -> Constants:
    return parse_constants(cost_data(path))


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise CostError(f"dtype {dtype!r} is not one the cost model knows ({', '.join(DTYPE_BYTES)})") from None
