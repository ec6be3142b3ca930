"""Quantization choices (backend, mode, calibration) and the defaults measured fastest; no heavy imports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from container.manifest import QuantizationSpec
from scripts.errors import SageboxError

DEFAULT_CALIBRATION_BATCHES = 100

Backend = Literal["onnxruntime", "torch"]
Mode = Literal["dynamic", "static"]
BACKENDS: tuple[str, ...] = get_args(Backend)
MODES: tuple[str, ...] = get_args(Mode)
RUNTIME_OF: dict[str, Literal["onnxruntime", "torchscript"]] = {
    "onnxruntime": "onnxruntime",
    "torch": "torchscript",
}

# Measured on this project's reference machine (see scripts/bench_models.py and the README): ONNX Runtime
# dynamic INT8 was the fastest variant at equal accuracy (F1 within noise of the static and torch variants).
DEFAULT_BACKEND: Backend = "onnxruntime"
DEFAULT_MODE: Mode = "dynamic"
TORCH_ENGINE = "x86"


@dataclass(frozen=True)
class QuantizeOptions:
    backend: Backend = DEFAULT_BACKEND
    mode: Mode = DEFAULT_MODE
    per_channel: bool = True
    reduce_range: bool = False
    calibration_batches: int = DEFAULT_CALIBRATION_BATCHES
    calibration_batch_size: int = 1
    calibration_method: str = "minmax"

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SageboxError(f"unknown backend {self.backend!r}: choose {' or '.join(BACKENDS)}")
        if self.mode not in MODES:
            raise SageboxError(f"unknown quantization mode {self.mode!r}: choose {' or '.join(MODES)}")
        if self.calibration_batches < 1 or self.calibration_batch_size < 1:
            raise SageboxError("calibration needs at least one batch of at least one example")

    @property
    def runtime(self) -> Literal["onnxruntime", "torchscript"]:
        return RUNTIME_OF[self.backend]

    def spec(self, calibration_batches_used: int) -> QuantizationSpec:
        static = self.mode == "static"
        return QuantizationSpec(
            backend=self.backend,
            mode=self.mode,
            per_channel=self.per_channel,
            calibration_batches=calibration_batches_used if static else 0,
            reduce_range=self.reduce_range,
            format=("qdq" if static else "qoperator") if self.backend == "onnxruntime" else None,
            engine=TORCH_ENGINE if self.backend == "torch" else None,
            calibration_method=self.calibration_method if static else None,
        )
