"""Deployment guardrails as SageMaker runs an endpoint update (pure logic: no I/O, time passed in).

After AWS's "Deployment guardrails", "Blue/Green Deployments" and its traffic shifting pages
(https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-blue-green.html): the new (green) fleet is
provisioned beside the old (blue) one; traffic then shifts to it in steps, and each step is followed by a baking
period (`WaitIntervalInSeconds`) during which the rollback alarms (`AutoRollbackConfiguration`) are watched:

- ALL_AT_ONCE: 100 % to green, one baking period;
- CANARY: `CanarySize` of green's capacity, a baking period, then 100 % and a final baking period;
- LINEAR: `LinearStepSize` more of green's capacity per step, a baking period after each, until 100 %.

An alarm in ALARM during any baking period rolls the update back: all traffic returns to blue and green stops.
`MaximumExecutionTimeoutInSeconds` bounds the update (a longer one rolls back; the box counts it from the moment
the new fleet is healthy, since starting instances takes real time that no time scale shortens). Once the last
baking period passes, the update is complete and blue stops `TerminationWaitInSeconds` later. With no
DeploymentConfig, SageMaker uses blue/green all at once with no baking period: green takes all traffic as soon as
it is healthy.

Times here are box seconds (see `sagebox.box.embedded_aws.config.TIME_SCALE_ENV`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sagebox.errors import SageboxError

ALL_AT_ONCE, CANARY, LINEAR = "ALL_AT_ONCE", "CANARY", "LINEAR"
INSTANCE_COUNT, CAPACITY_PERCENT = "INSTANCE_COUNT", "CAPACITY_PERCENT"
# SageMaker's bounds (API reference: TrafficRoutingConfig, BlueGreenUpdatePolicy).
MAX_WAIT_S = 3600
MIN_EXECUTION_TIMEOUT_S, MAX_EXECUTION_TIMEOUT_S = 600, 28800

# Rollout outcomes.
IN_PROGRESS, COMPLETED, ROLLED_BACK = "in progress", "completed", "rolled back"


class GuardrailError(SageboxError):
    """A DeploymentConfig SageMaker would refuse (the API answers ValidationException with this message)."""


@dataclass(frozen=True)
class CapacitySize:
    kind: str  # INSTANCE_COUNT | CAPACITY_PERCENT
    value: int

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None, what: str) -> CapacitySize:
        if not raw:
            raise GuardrailError(f"{what} is required for this traffic routing type")
        kind = str(raw.get("Type", ""))
        if kind not in (INSTANCE_COUNT, CAPACITY_PERCENT):
            raise GuardrailError(f"{what}.Type must be {INSTANCE_COUNT} or {CAPACITY_PERCENT}, not {kind!r}")
        try:
            value = int(raw.get("Value", 0))
        except (TypeError, ValueError):
            raise GuardrailError(f"{what}.Value must be an integer") from None
        if value < 1 or (kind == CAPACITY_PERCENT and value > 100):
            raise GuardrailError(f"{what}.Value {value} is out of range")
        return cls(kind, value)

    def share(self, fleet_instances: int) -> float:
        """The share of the new fleet's capacity (so of the endpoint's traffic) this size stands for."""
        if self.kind == INSTANCE_COUNT:
            return min(1.0, self.value / max(1, fleet_instances))
        return min(1.0, self.value / 100.0)

    def describe(self) -> str:
        return f"{self.value} instance(s)" if self.kind == INSTANCE_COUNT else f"{self.value}%"


@dataclass(frozen=True)
class DeploymentPolicy:
    traffic: str = ALL_AT_ONCE
    wait_s: float = 0.0  # each baking period
    canary: CapacitySize | None = None
    linear_step: CapacitySize | None = None
    termination_wait_s: float = 0.0
    max_execution_s: float | None = None
    alarms: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> DeploymentPolicy:
        """The policy of an UpdateEndpoint `DeploymentConfig` (None or {}: SageMaker's default, all at once)."""
        if not config:
            return cls()
        if config.get("RollingUpdatePolicy"):
            raise GuardrailError(
                "RollingUpdatePolicy is not run by the box: use BlueGreenUpdatePolicy (all at once, canary or linear)"
            )
        alarms = tuple(
            str(a["AlarmName"])
            for a in (config.get("AutoRollbackConfiguration") or {}).get("Alarms") or []
            if a.get("AlarmName")
        )
        blue_green = config.get("BlueGreenUpdatePolicy") or {}
        if not blue_green:
            return cls(alarms=alarms)
        routing = blue_green.get("TrafficRoutingConfiguration") or {}
        traffic = str(routing.get("Type", ALL_AT_ONCE))
        if traffic not in (ALL_AT_ONCE, CANARY, LINEAR):
            raise GuardrailError(
                f"TrafficRoutingConfiguration.Type must be {ALL_AT_ONCE}, {CANARY} or {LINEAR}, not {traffic!r}"
            )
        wait = _seconds(routing.get("WaitIntervalInSeconds", 0), "WaitIntervalInSeconds", 0, MAX_WAIT_S)
        termination = _seconds(blue_green.get("TerminationWaitInSeconds", 0), "TerminationWaitInSeconds", 0, MAX_WAIT_S)
        timeout = blue_green.get("MaximumExecutionTimeoutInSeconds")
        max_execution = (
            None
            if timeout is None
            else _seconds(timeout, "MaximumExecutionTimeoutInSeconds", MIN_EXECUTION_TIMEOUT_S, MAX_EXECUTION_TIMEOUT_S)
        )
        canary = CapacitySize.parse(routing.get("CanarySize"), "CanarySize") if traffic == CANARY else None
        step = CapacitySize.parse(routing.get("LinearStepSize"), "LinearStepSize") if traffic == LINEAR else None
        return cls(traffic, wait, canary, step, termination, max_execution, alarms)

    def check_fleet(self, instances: int) -> None:
        """SageMaker's limits that depend on the new fleet's size: a canary is at most half of it, a linear step
        10-50 % of it (the deployment guardrails pages)."""
        if self.canary is not None and self.canary.share(instances) > 0.5:
            raise GuardrailError(
                f"CanarySize {self.canary.describe()} is more than 50% of the new fleet's {instances} instance(s)"
            )
        if self.linear_step is not None:
            share = self.linear_step.share(instances)
            if not 0.1 <= share <= 0.5:
                raise GuardrailError(
                    f"LinearStepSize {self.linear_step.describe()} must be 10-50% of the new fleet's "
                    f"{instances} instance(s)"
                )

    def steps(self, instances: int) -> tuple[float, ...]:
        """The new fleet's share of traffic at each step, ending at 1.0."""
        if self.traffic == CANARY and self.canary is not None:
            first = self.canary.share(instances)
            return (first, 1.0) if first < 1.0 else (1.0,)
        if self.traffic == LINEAR and self.linear_step is not None:
            step = self.linear_step.share(instances)
            count = math.ceil(1.0 / step - 1e-9)
            return (*(min(1.0, step * (k + 1)) for k in range(count - 1)), 1.0)
        return (1.0,)

    def describe(self) -> str:
        if self.traffic == CANARY and self.canary is not None:
            how = f"canary {self.canary.describe()}"
        elif self.traffic == LINEAR and self.linear_step is not None:
            how = f"linear steps of {self.linear_step.describe()}"
        else:
            how = "all at once"
        return f"blue/green {how}, bake {self.wait_s:g} s, termination wait {self.termination_wait_s:g} s"


def _seconds(raw: Any, what: str, low: float, high: float) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise GuardrailError(f"{what} must be a number of seconds") from None
    if not low <= value <= high:
        raise GuardrailError(f"{what} {value:g} is outside {low:g}-{high:g}")
    return value


@dataclass(frozen=True)
class Step:
    """What the rollout asks for now: the new fleet's share of traffic and where the rollout stands."""

    share: float
    outcome: str  # IN_PROGRESS | COMPLETED | ROLLED_BACK
    status: str  # the new fleet's VariantStatus (Baking, ActivatingTraffic), or the outcome
    message: str
    changed: bool  # the share or the outcome changed in this call


@dataclass
class Rollout:
    """One blue/green update from the moment the new fleet is healthy; `advance` is called on every control-plane
    pass with the box time and the rollback alarms now in ALARM (name -> the alarm's reason)."""

    policy: DeploymentPolicy
    instances: int  # the new fleet's instance count
    requested_at: float  # when UpdateEndpoint was called (the execution timeout counts from there)
    steps: tuple[float, ...] = field(init=False)
    step: int = -1
    step_started: float = 0.0
    outcome: str = IN_PROGRESS
    reason: str = ""
    completed_at: float | None = None

    def __post_init__(self) -> None:
        self.steps = self.policy.steps(self.instances)

    @property
    def share(self) -> float:
        if self.outcome == ROLLED_BACK or self.step < 0:
            return 0.0
        return self.steps[self.step]

    def retire_at(self) -> float | None:
        """When the old fleet stops (the termination wait after completion); None until complete."""
        if self.completed_at is None:
            return None
        return self.completed_at + self.policy.termination_wait_s

    def advance(self, now: float, alarming: Mapping[str, str]) -> Step:
        if self.outcome != IN_PROGRESS:
            return self._now(False)
        if self.step < 0:  # the new fleet is healthy: the first shift
            self.step, self.step_started = 0, now
            changed = True
        else:
            changed = False
        timeout = self.policy.max_execution_s
        if timeout is not None and now - self.requested_at > timeout:
            return self._roll_back(
                f"the update exceeded MaximumExecutionTimeoutInSeconds ({timeout:g} s) "
                f"at step {self.step + 1} of {len(self.steps)}"
            )
        watched = [name for name in self.policy.alarms if name in alarming]
        if watched:
            first = watched[0]
            return self._roll_back(
                f"alarm {first} went into ALARM while baking step {self.step + 1} of {len(self.steps)} "
                f"({self.share:.0%} of traffic on the new fleet): {alarming[first]}"
            )
        while now - self.step_started >= self.policy.wait_s:
            if self.step + 1 >= len(self.steps):
                self.outcome, self.completed_at = COMPLETED, now
                return self._now(True)
            self.step += 1
            self.step_started += self.policy.wait_s
            changed = True
            if self.policy.wait_s > 0:
                break
        return self._now(changed)

    def _roll_back(self, reason: str) -> Step:
        self.outcome, self.reason = ROLLED_BACK, reason
        return self._now(True)

    def _now(self, changed: bool) -> Step:
        if self.outcome == IN_PROGRESS:
            status = "Baking" if self.policy.wait_s > 0 else "ActivatingTraffic"
            message = (
                f"step {self.step + 1} of {len(self.steps)}: {self.share:.0%} of traffic on the new fleet "
                f"({self.policy.describe()})"
            )
        elif self.outcome == COMPLETED:
            status, message = COMPLETED, "all traffic on the new fleet"
        else:
            status, message = ROLLED_BACK, self.reason
        return Step(self.share, self.outcome, status, message, changed)
