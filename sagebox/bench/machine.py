"""What a benchmark ran on: CPU model, the SIMD flags INT8 speed depends on, how busy other processes were."""

from __future__ import annotations

import os
import platform
import resource
from dataclasses import dataclass
from pathlib import Path

# Flags that decide which INT8/FP32 kernels the runtimes pick.
INTERESTING_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, object]:
    model = platform.processor() or "unknown"
    flags: set[str] = set()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in {"unknown", "x86_64", ""}:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {
        "model": model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "flags": {flag: flag in flags for flag in INTERESTING_FLAGS},
        "int8_dot_product": "avx512_vnni"
        if "avx512_vnni" in flags
        else "avx_vnni"
        if "avx_vnni" in flags
        else "none (AVX2 pmaddubsw path)",
    }


@dataclass(frozen=True)
class CpuSnapshot:
    busy_s: float  # all processes, all CPUs
    total_s: float
    ours_s: float  # this process and its waited-for children

    @classmethod
    def take(cls, stat: Path = Path("/proc/stat")) -> CpuSnapshot:
        tick = os.sysconf("SC_CLK_TCK")
        fields = [int(x) for x in stat.read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        total = sum(fields[:8])
        me = resource.getrusage(resource.RUSAGE_SELF)
        kids = resource.getrusage(resource.RUSAGE_CHILDREN)
        ours = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
        return cls((total - idle) / tick, total / tick, ours)


def load_between(start: CpuSnapshot, end: CpuSnapshot, cpus: int) -> dict[str, float]:
    """Average CPUs kept busy by this process and by everything else between two snapshots."""
    wall = max((end.total_s - start.total_s) / max(cpus, 1), 1e-9)
    ours = (end.ours_s - start.ours_s) / wall
    everyone = (end.busy_s - start.busy_s) / wall
    return {
        "wall_s": round(wall, 1),
        "cpus_busy_total": round(everyone, 2),
        "cpus_busy_this_run": round(ours, 2),
        "cpus_busy_others": round(max(everyone - ours, 0.0), 2),
        "loadavg_1m_at_end": round(os.getloadavg()[0], 2),
    }
