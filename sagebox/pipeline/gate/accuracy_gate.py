"""The INT8 accuracy gate: the quantized model may lose at most `max_f1_drop` F1 points against FP32."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagebox.errors import SageboxError
from sagebox.pipeline.gate.squad_metric import SquadScore

DEFAULT_MAX_F1_DROP = 1.0


class GateFailed(SageboxError):
    """INT8 lost more F1 than allowed; its model directory was removed."""


@dataclass(frozen=True)
class GateResult:
    fp32: SquadScore
    int8: SquadScore
    max_f1_drop: float

    @property
    def f1_drop(self) -> float:
        return self.fp32.f1 - self.int8.f1

    @property
    def em_drop(self) -> float:
        return self.fp32.exact_match - self.int8.exact_match

    @property
    def passed(self) -> bool:
        return self.f1_drop <= self.max_f1_drop

    def message(self) -> str:
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"accuracy gate {verdict}: INT8 F1 {self.int8.f1:.2f} vs FP32 {self.fp32.f1:.2f} "
            f"(drop {self.f1_drop:+.2f}, allowed {self.max_f1_drop:.2f})"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "max_f1_drop": self.max_f1_drop,
            "f1_drop": round(self.f1_drop, 4),
            "em_drop": round(self.em_drop, 4),
            "fp32": self.fp32.to_dict(),
            "int8": self.int8.to_dict(),
        }


def check_max_drop(max_f1_drop: float) -> float:
    if not math.isfinite(max_f1_drop) or max_f1_drop < 0:
        raise SageboxError(f"--max-f1-drop must be a finite number >= 0, got {max_f1_drop}")
    return max_f1_drop


def check_gate(fp32: SquadScore, int8: SquadScore, max_f1_drop: float = DEFAULT_MAX_F1_DROP) -> GateResult:
    if fp32.total != int8.total:
        raise SageboxError(f"FP32 and INT8 were scored on different sets ({fp32.total} vs {int8.total} questions)")
    return GateResult(fp32, int8, check_max_drop(max_f1_drop))
