"""The kind of CPU this process runs on, as INT8 kernels care about it, and which of a model's builds to load there.

A kind is named for the best INT8 dot-product instructions the CPU has, since that decides which runtime is fastest
(docs/benchmarks.md, "INT8 runtimes per CPU kind"): on an AVX2-only AMD EPYC ONNX Runtime's dynamic INT8 was 2x
faster than OpenVINO's; on AVX-512 VNNI CPUs (an AMD EPYC Zen 4, an Intel Xeon Ice Lake) OpenVINO's NNCF INT8 was
the faster. SageMaker's CPU families differ in exactly this: C5 (Skylake/Cascade Lake: AVX-512), C6i (Ice Lake:
AVX-512 VNNI), C7i (Sapphire Rapids: AMX), C6a (Zen 3: AVX2), C7a (Zen 4: AVX-512 VNNI), C7g (Graviton: Arm).
infra/data/instances.json records each instance family's kind.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

CpuKind = Literal["amx", "avx512_vnni", "avx512", "avx2", "arm64", "other"]
CPU_KINDS: tuple[CpuKind, ...] = get_args(CpuKind)
# Forces the kind (tests, and a build that must be rehearsed as another CPU would load it).
CPU_KIND_VARIABLE = "SAGEBOX_CPU_KIND"
# Pins the runtime a model loads with ("auto": the manifest's choice for this CPU kind).
RUNTIME_VARIABLE = "SAGEBOX_RUNTIME"
RUNTIME_CHOICES = ("auto", "onnxruntime", "openvino", "torchscript")


def kind_of(flags: Iterable[str], machine: str = "x86_64") -> CpuKind:
    """The kind named by /proc/cpuinfo's flags: the best INT8 instructions first."""
    if machine.lower() in ("aarch64", "arm64"):
        return "arm64"
    have = set(flags)
    if {"amx_tile", "amx_int8"} <= have:
        return "amx"
    if "avx512_vnni" in have:
        return "avx512_vnni"
    if {"avx512f", "avx512bw"} <= have:
        return "avx512"
    if "avx2" in have:
        return "avx2"
    return "other"


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """The first processor's flags (every core of a SageMaker instance has the same)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return line.partition(":")[2].split()
    except OSError:
        pass
    return []


def detect(env: Mapping[str, str], cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuKind:
    """This machine's kind, or the one SAGEBOX_CPU_KIND forces (an unknown name is an error, not a guess)."""
    forced = env.get(CPU_KIND_VARIABLE, "").strip().lower()
    if forced:
        if forced not in CPU_KINDS:
            raise ValueError(f"{CPU_KIND_VARIABLE} must be one of {', '.join(CPU_KINDS)}; got {forced!r}")
        return forced
    return kind_of(cpu_flags(cpuinfo), platform.machine())


@dataclass(frozen=True)
class Decision:
    """Which build of the model a server loads, on what kind of CPU, and why (its log line and /ping say it)."""

    runtime: str
    model_file: str
    cpu_kind: str
    reason: str

    def describe(self) -> str:
        return f"runtime={self.runtime} ({self.model_file}) on cpu_kind={self.cpu_kind}: {self.reason}"
