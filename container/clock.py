"""Time for the serving path, passed in rather than read from globals: deadlines, expiry, model-call timing.

The server runs on `MonotonicClock`; tests drive a hand-advanced clock so that "the deadline passed" is an event
they order explicitly, never a wall-clock threshold.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale (only differences mean anything); safe to call from any thread."""
        ...

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[object]:
        """An async context that cancels its body and raises TimeoutError once `now()` reaches `deadline`."""
        ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def timeout_at(self, deadline: float) -> AbstractAsyncContextManager[object]:
        return asyncio.timeout(max(0.0, deadline - time.monotonic()))
