"""NeuronCore-v2 engine figures (neuron_emu's data file) and the chip figures from the instance catalog."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from neuron_emu.paths import DATA_DIR

GIB = 1024**3


@dataclass(frozen=True)
class CoreSpec:
    name: str
    tensor_tflops: dict[str, float]
    vector_tflops: float
    scalar_tflops: float
    gpsimd_cores: int
    gpsimd_lanes_fp32: int
    gpsimd_clock_ghz: float
    sbuf_bytes: int
    hbm_bytes_per_s_per_core: float
    cores_per_chip: int

    @property
    def gpsimd_core_ops_per_s(self) -> float:
        return self.gpsimd_lanes_fp32 * self.gpsimd_clock_ghz * 1e9

    def tensor_peak(self, dtype: str) -> float:
        """Tensor-engine FLOP/s for operands of `dtype` (bf16, fp16, tf32, fp8_e4m3 or fp32)."""
        return self.tensor_tflops.get(dtype, self.tensor_tflops["fp32"]) * 1e12


@cache
def neuroncore_v2() -> CoreSpec:
    from infra.catalog import DATA_DIR as CATALOG_DIR

    raw = json.loads((DATA_DIR / "neuroncore_v2.json").read_text())
    # The chip (2 cores sharing HBM) is described once, in the instance catalog's data file.
    chip = json.loads((CATALOG_DIR / "instances.json").read_text())["neuron_chip"]
    cores_per_chip = int(chip["cores_per_chip"])
    return CoreSpec(
        name=raw["name"],
        tensor_tflops={k: float(v) for k, v in raw["tensor_engine"]["tflops"].items()},
        vector_tflops=float(raw["vector_engine"]["tflops"]),
        scalar_tflops=float(raw["scalar_engine"]["tflops"]),
        gpsimd_cores=int(raw["gpsimd"]["cores"]),
        gpsimd_lanes_fp32=int(raw["gpsimd"]["simd_bits"]) // 32,
        gpsimd_clock_ghz=float(raw["gpsimd"]["assumed_clock_ghz"]),
        sbuf_bytes=int(raw["sbuf_mib"]) * 1024**2,
        hbm_bytes_per_s_per_core=float(chip["hbm_gib_per_s"]) * GIB / cores_per_chip,
        cores_per_chip=cores_per_chip,
    )
