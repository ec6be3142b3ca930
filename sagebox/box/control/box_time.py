"""Box time: the control plane's clock sped up by the box's time scale (sagebox.box.embedded_aws.config.TIME_SCALE_ENV).

Deployment waits (bakes, termination waits, the execution timeout) and the serverless idle period are box seconds, so
a 300 s bake lasts 3 s at a 0.01 scale; what the box reports back to people (fleet.json's `stops_in_s`) and what it
compares with real clocks is real seconds again. Health checks and cold starts are measured on the clock itself: a
process starts no faster because the box's time runs faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BoxTime:
    clock: Callable[[], float] = time.monotonic  # real seconds (injected by tests)
    scale: float = 1.0

    def now(self) -> float:
        """Box seconds: the clock divided by the time scale."""
        return self.clock() / self.scale

    def real_s(self, box_s: float) -> float:
        """A length of box time in real seconds."""
        return box_s * self.scale
