"""Target tracking on a SageMaker variant's invocations per instance, as Application Auto Scaling runs it (pure
logic: the per-minute metric, the capacity and time passed in).

After AWS's "Target tracking scaling policies for Application Auto Scaling"
(https://docs.aws.amazon.com/autoscaling/application/userguide/application-auto-scaling-target-tracking.html) and
SageMaker's "Automatic scaling of Amazon SageMaker AI models": a target tracking policy keeps two alarms on the
metric (here `SageMakerVariantInvocationsPerInstance`, the variant's invocations per instance per minute). The
high one fires when 3 consecutive one-minute datapoints are above the target and scales out; the low one fires when
15 consecutive datapoints are below 90 % of the target and scales in. The new capacity is proportional:
ceil(capacity x metric / target), kept within the scalable target's MinCapacity..MaxCapacity. After a scale-out no
other scale-out starts for ScaleOutCooldown; after a scale-in no other scale-in for ScaleInCooldown (a scale-out
may still happen). Suspended scaling (the target's SuspendedState) and DisableScaleIn are honoured.

One difference, on purpose: a minute in which the variant got no invocation has no datapoint in CloudWatch, and
AWS's low alarm then never fires (an idle endpoint stays scaled out); the box counts such a minute as 0
invocations, so an idle endpoint scales back in. Only minutes since the policy started watching count.

Times are box seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

HIGH_DATAPOINTS = 3
LOW_DATAPOINTS = 15
LOW_FRACTION = 0.9
DEFAULT_COOLDOWN_S = 300.0
METRIC_PERIOD_S = 60.0
PREDEFINED_METRIC = "SageMakerVariantInvocationsPerInstance"


@dataclass(frozen=True)
class Bounds:
    min_capacity: int
    max_capacity: int
    scale_in_suspended: bool = False
    scale_out_suspended: bool = False


@dataclass(frozen=True)
class TargetTracking:
    target: float
    scale_in_cooldown_s: float = DEFAULT_COOLDOWN_S
    scale_out_cooldown_s: float = DEFAULT_COOLDOWN_S
    disable_scale_in: bool = False


@dataclass
class History:
    last_scale_out: float | None = None
    last_scale_in: float | None = None


@dataclass(frozen=True)
class Decision:
    desired: int
    cause: str


def _bounded(capacity: int, bounds: Bounds) -> int:
    return max(bounds.min_capacity, min(bounds.max_capacity, capacity))


def decide(
    policy: TargetTracking,
    bounds: Bounds,
    capacity: int,
    minutes: Sequence[float | None],
    now: float,
    history: History,
) -> Decision | None:
    """A new desired capacity, or None. `minutes` are the complete one-minute datapoints since the policy started
    watching, oldest first (None: no invocation that minute, counted as 0)."""
    if capacity < bounds.min_capacity or capacity > bounds.max_capacity:
        desired = _bounded(capacity, bounds)
        return Decision(desired, f"capacity {capacity} is outside MinCapacity..MaxCapacity")
    values = [0.0 if v is None else float(v) for v in minutes]
    if policy.target <= 0:
        return None
    if len(values) >= HIGH_DATAPOINTS and all(v > policy.target for v in values[-HIGH_DATAPOINTS:]):
        in_cooldown = history.last_scale_out is not None and now - history.last_scale_out < policy.scale_out_cooldown_s
        desired = _bounded(math.ceil(capacity * values[-1] / policy.target), bounds)
        if desired > capacity and not in_cooldown and not bounds.scale_out_suspended:
            return Decision(
                desired,
                f"{HIGH_DATAPOINTS} minutes above the target of {policy.target:g} invocations per instance "
                f"(last {values[-1]:g})",
            )
        return None
    low = LOW_FRACTION * policy.target
    if len(values) >= LOW_DATAPOINTS and all(v < low for v in values[-LOW_DATAPOINTS:]):
        if policy.disable_scale_in or bounds.scale_in_suspended:
            return None
        if history.last_scale_in is not None and now - history.last_scale_in < policy.scale_in_cooldown_s:
            return None
        desired = _bounded(math.ceil(capacity * values[-1] / policy.target), bounds)
        if desired < capacity:
            return Decision(
                desired,
                f"{LOW_DATAPOINTS} minutes below {LOW_FRACTION:.0%} of the target of {policy.target:g} invocations "
                f"per instance (last {values[-1]:g})",
            )
    return None


def record(history: History, decision: Decision, capacity: int, now: float) -> None:
    if decision.desired > capacity:
        history.last_scale_out = now
    elif decision.desired < capacity:
        history.last_scale_in = now
