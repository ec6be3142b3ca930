from __future__ import annotations

import os
import time
from pathlib import Path

from container.uptime import process_age_s


def test_the_age_is_counted_from_the_kernels_start_time(tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    started = int((time.clock_gettime(time.CLOCK_BOOTTIME) - 5.0) * ticks)
    fields = ["S", *["0"] * 18, str(started), "0"]  # fields 3..23; starttime is field 22
    stat = tmp_path / "stat"
    stat.write_text(f"1234 (a name) with spaces) {' '.join(fields)}\n")
    age = process_age_s(stat)
    assert age is not None and 5.0 <= age < 5.0 + 2 / ticks + 1.0


def test_this_process_is_younger_than_the_machine_and_unreadable_stat_is_none(tmp_path: Path) -> None:
    age = process_age_s()
    assert age is not None and 0.0 < age < time.clock_gettime(time.CLOCK_BOOTTIME)
    assert process_age_s(tmp_path / "missing") is None
    (tmp_path / "garbled").write_text("no parenthesis here")
    assert process_age_s(tmp_path / "garbled") is None
