"""How long the fault scenarios wait, and for what: every wait is for an event (an answer, a record in fleet.json, a
process gone), bounded only so that a hang ends the run instead of stalling it."""

from __future__ import annotations

import time
from collections.abc import Callable

# The box's control plane replaces a dead instance; the waits below only guard against a hang.
HANG_GUARD_S = 300.0


def poll(condition: Callable[[], bool], timeout_s: float = HANG_GUARD_S, every_s: float = 0.1) -> bool:
    """Until `condition()` holds (True) or `timeout_s` passed (False): waits for a state, orders nothing."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True
