"""The INT8 accuracy gate of every task: each check compares INT8 with FP32 on one metric, and INT8 is kept only
when every check passes.

A check is a drop (FP32 minus INT8, in points, at most `limit`) or a floor (INT8's value at least `limit`, e.g. the
mean cosine between INT8 and FP32 embeddings). Without labelled data the gate scores INT8 against FP32's own outputs
on calibration text (agreement), and says that no labelled accuracy was measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sagebox.errors import SageboxError

DEFAULT_MAX_DROP = 1.0  # points
DEFAULT_MIN_COSINE = 0.99


@dataclass(frozen=True)
class GateLimits:
    max_drop: float = DEFAULT_MAX_DROP
    min_cosine: float = DEFAULT_MIN_COSINE

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_drop) or self.max_drop < 0:
            raise SageboxError(f"--max-drop must be a finite number >= 0, got {self.max_drop}")
        if not math.isfinite(self.min_cosine) or not -1.0 <= self.min_cosine <= 1.0:
            raise SageboxError(f"--min-cosine must be between -1 and 1, got {self.min_cosine}")


@dataclass(frozen=True)
class MetricCheck:
    name: str  # as shown: "accuracy", "macro-F1", "entity F1", "recall@10", "cosine(INT8, FP32)", ...
    fp32: float
    int8: float
    limit: float
    # drop: FP32 - INT8 <= limit; agreement: the same, FP32 being 100 (INT8 scored against FP32's own outputs);
    # floor: INT8 >= limit.
    kind: Literal["drop", "agreement", "floor"] = "drop"

    @property
    def drop(self) -> float:
        return self.fp32 - self.int8

    @property
    def passed(self) -> bool:
        return self.int8 >= self.limit - 1e-12 if self.kind == "floor" else self.drop <= self.limit + 1e-9

    def describe(self) -> str:
        if self.kind == "floor":
            return f"{self.name} {self.int8:.4f} (at least {self.limit:.4f})"
        if self.kind == "agreement":
            return f"INT8 {self.name} {self.int8:.2f}% (at least {self.fp32 - self.limit:.2f}%)"
        change = f"drop {self.drop:+.2f}, allowed {self.limit:.2f}"
        return f"INT8 {self.name} {self.int8:.2f} vs FP32 {self.fp32:.2f} ({change})"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "metric": self.name,
            "fp32": round(self.fp32, 6),
            "int8": round(self.int8, 6),
            "kind": self.kind,
            "limit": self.limit,
            "passed": self.passed,
        }
        if self.kind != "floor":
            out["drop"] = round(self.drop, 6)
        return out


@dataclass(frozen=True)
class TaskGate:
    task: str
    checks: tuple[MetricCheck, ...]
    labelled: bool
    data: str  # what the gate measured on

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)

    def message(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        parts = "; ".join(check.describe() for check in self.checks)
        text = f"accuracy gate {verdict}: {parts}"
        if not self.labelled:
            text += " (no labelled accuracy was measured: INT8 was compared with FP32's outputs)"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "passed": self.passed,
            "labelled": self.labelled,
            "data": self.data,
            "checks": [check.to_dict() for check in self.checks],
        }


def drops(
    task: str,
    names: Sequence[str],
    fp32: dict[str, float],
    int8: dict[str, float],
    limits: GateLimits,
    labelled: bool,
    data: str,
) -> TaskGate:
    """A gate of drop checks on `names` of two metric dicts."""
    checks = tuple(MetricCheck(name, fp32[name], int8[name], limits.max_drop) for name in names)
    return TaskGate(task, checks, labelled, data)
