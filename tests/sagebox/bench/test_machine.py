from __future__ import annotations

from pathlib import Path

from sagebox.bench.machine import CpuSnapshot, cpu_info, load_between


def test_cpu_info_reads_flags(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Test CPU\nflags\t\t: fpu avx2 fma avx512f avx512_vnni\n\nflags\t: other\n")
    info = cpu_info(cpuinfo)
    assert info["flags"]["avx2"] and info["flags"]["avx512_vnni"]  # type: ignore[index]
    assert not info["flags"]["amx_int8"]  # type: ignore[index]
    assert info["int8_dot_product"] == "avx512_vnni"
    cpuinfo.write_text("model name\t: Old CPU\nflags\t\t: avx2 fma\n")
    assert str(cpu_info(cpuinfo)["int8_dot_product"]).startswith("none")


def test_load_between_splits_ours_from_others() -> None:
    start = CpuSnapshot(busy_s=100.0, total_s=1000.0, ours_s=10.0)
    # 20 s of wall time on 2 CPUs: 40 CPU-seconds, 30 of them busy, 12 of those ours
    end = CpuSnapshot(busy_s=130.0, total_s=1040.0, ours_s=22.0)
    load = load_between(start, end, cpus=2)
    assert load["wall_s"] == 20.0
    assert load["cpus_busy_total"] == 1.5
    assert load["cpus_busy_this_run"] == 0.6
    assert load["cpus_busy_others"] == 0.9


def test_snapshot_of_this_machine() -> None:
    snap = CpuSnapshot.take()
    assert snap.total_s >= snap.busy_s > 0
    assert snap.ours_s > 0
