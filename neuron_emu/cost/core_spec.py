"""NeuronCore-v2 engine figures and the chip figures (HBM and DMA shared by a chip's cores), from neuron_emu/data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

from neuron_emu.hardware import GIB, chips
from neuron_emu.paths import DATA_DIR

__all__ = ["GIB", "CoreSpec", "neuroncore_v2"]


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
    dma_bytes_per_s_per_core: float
    cores_per_chip: int

    @property
    def gpsimd_core_ops_per_s(self) -> float:
        return self.gpsimd_lanes_fp32 * self.gpsimd_clock_ghz * 1e9

    def tensor_peak(self, dtype: str) -> float:
        """Tensor-engine FLOP/s for operands of `dtype` (bf16, fp16, tf32, fp8_e4m3 or fp32)."""
        return self.tensor_tflops.get(dtype, self.tensor_tflops["fp32"]) * 1e12


@cache
def neuroncore_v2() -> CoreSpec:
    raw = json.loads((DATA_DIR / "neuroncore_v2.json").read_text())
    # Inferentia2 and Trainium chips hold the same two NeuronCore-v2 with the same HBM and DMA figures
    # (data/neuron_instances.json); the per-core shares are taken from the Inferentia2 chip.
    chip = chips()["inferentia2"]
    cores_per_chip = chip.cores_per_chip
    return CoreSpec(
        name=raw["name"],
        tensor_tflops={k: float(v) for k, v in raw["tensor_engine"]["tflops"].items()},
        vector_tflops=float(raw["vector_engine"]["tflops"]),
        scalar_tflops=float(raw["scalar_engine"]["tflops"]),
        gpsimd_cores=int(raw["gpsimd"]["cores"]),
        gpsimd_lanes_fp32=int(raw["gpsimd"]["simd_bits"]) // 32,
        gpsimd_clock_ghz=float(raw["gpsimd"]["assumed_clock_ghz"]),
        sbuf_bytes=int(raw["sbuf_mib"]) * 1024**2,
        hbm_bytes_per_s_per_core=chip.hbm_bytes_per_s / cores_per_chip,
        dma_bytes_per_s_per_core=chip.dma_bytes_per_s / cores_per_chip,
        cores_per_chip=cores_per_chip,
    )
