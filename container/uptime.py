"""How long this process has been running, as the kernel counts it: a cold start's whole time, interpreter and
imports included (what `/ping` waits for after `docker run IMAGE serve`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

# /proc/<pid>/stat field 22 (starttime), in clock ticks after boot: proc(5).
_STARTTIME_FIELD = 22


def process_age_s(stat: Path = Path("/proc/self/stat")) -> float | None:
    """Seconds since this process started (to the kernel's clock tick, 10 ms at 100 Hz); None where there is no
    /proc (not Linux)."""
    try:
        text = stat.read_text()
        # The command name (field 2) is in parentheses and may hold spaces: count the fields after its ")".
        after_name = text[text.rindex(")") + 1 :].split()
        started_ticks = int(after_name[_STARTTIME_FIELD - 3])
        ticks_per_s = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / ticks_per_s)
