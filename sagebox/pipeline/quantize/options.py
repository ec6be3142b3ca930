"""Quantization choices (backend, mode, calibration) and the defaults measured fastest; no heavy imports."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

from container.manifest import QuantizationSpec
from sagebox.errors import SageboxError

DEFAULT_CALIBRATION_BATCHES = 100

# "openvino": an OpenVINO IR converted from the PyTorch module (attention kept as one ScaledDotProductAttention op)
# and quantized by NNCF with calibration data: static only.
Backend = Literal["onnxruntime", "torch", "openvino"]
Mode = Literal["dynamic", "static"]
BACKENDS: tuple[str, ...] = get_args(Backend)
MODES: tuple[str, ...] = get_args(Mode)
RUNTIME_OF: dict[str, Literal["onnxruntime", "torchscript", "openvino"]] = {
    "onnxruntime": "onnxruntime",
    "torch": "torchscript",
    "openvino": "openvino",
}

# The fastest INT8 variant at equal accuracy in scripts/bench_models.py (.sagebox/bench/models.json reports
# "fastest_int8_at_equal_accuracy"): ONNX Runtime, dynamic. Static modes lose more F1 on the demo model.
DEFAULT_BACKEND: Backend = "onnxruntime"
DEFAULT_MODE: Mode = "dynamic"
TORCH_ENGINE = "x86"
# Static calibration methods per backend, the default first. Plain min/max lets one outlier activation set
# the scale for every value: on the MiniLM demo it cost ~17 F1 points, the clipping methods far less.
CALIBRATION_METHODS: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("percentile", "entropy", "minmax"),
    "torch": ("histogram", "minmax"),
    # NNCF's transformer recipe: SmoothQuant, min/max ranges with outlier-robust quantiles, fast bias correction.
    "openvino": ("nncf-transformer",),
}
CALIBRATION_PERCENTILE = 99.999


@dataclass(frozen=True)
class QuantizeOptions:
    backend: Backend = DEFAULT_BACKEND
    mode: Mode = DEFAULT_MODE
    per_channel: bool = True
    reduce_range: bool = False
    calibration_batches: int = DEFAULT_CALIBRATION_BATCHES
    calibration_batch_size: int = 1
    calibration_method: str = "auto"
    # Op types left in FP32 (ONNX Runtime only), e.g. ("Attention",): slower, more accurate.
    fp32_op_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SageboxError(f"unknown backend {self.backend!r}: choose {' or '.join(BACKENDS)}")
        if self.mode not in MODES:
            raise SageboxError(f"unknown quantization mode {self.mode!r}: choose {' or '.join(MODES)}")
        if self.calibration_batches < 1 or self.calibration_batch_size < 1:
            raise SageboxError("calibration needs at least one batch of at least one example")
        if self.backend == "openvino" and self.mode != "static":
            raise SageboxError(
                "the openvino backend quantizes statically (NNCF, with calibration data): use --mode static"
            )
        if self.fp32_op_types and self.backend != "onnxruntime":
            raise SageboxError("keeping op types in FP32 is supported with the onnxruntime backend only")
        allowed = CALIBRATION_METHODS[self.backend]
        if self.calibration_method != "auto" and self.calibration_method not in allowed:
            raise SageboxError(
                f"calibration method {self.calibration_method!r} is not available for {self.backend}: "
                f"choose {', '.join(allowed)}"
            )

    @property
    def method(self) -> str:
        """The calibration method static mode uses ("auto" picks the backend's outlier-robust one)."""
        return CALIBRATION_METHODS[self.backend][0] if self.calibration_method == "auto" else self.calibration_method

    @property
    def runtime(self) -> Literal["onnxruntime", "torchscript", "openvino"]:
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
            calibration_method=self.method if static else None,
            fp32_op_types=list(self.fp32_op_types),
        )

    def describe(self) -> str:
        parts = [self.backend, self.mode, "per-channel" if self.per_channel else "per-tensor"]
        if self.reduce_range:
            parts.append("7-bit weights")
        if self.fp32_op_types:
            parts.append(f"{', '.join(self.fp32_op_types)} kept in FP32")
        return " ".join(parts)


# The embedding lookups: one fused op in a graph fused by onnxruntime.transformers, Gathers in a plain one.
EMBEDDING_OP_TYPES: tuple[str, ...] = ("EmbedLayerNormalization", "Gather")


# The other runtimes' INT8 builds `sagebox quantize` and `sagebox build` add beside the primary (issue 41).
OPENVINO = QuantizeOptions(backend="openvino", mode="static")


def alternatives_for(options: QuantizeOptions) -> tuple[QuantizeOptions, ...]:
    """The other runtimes' builds for a primary built with `options`: OpenVINO's, unless it is the primary."""
    return () if options.backend == "openvino" else (dataclasses.replace(OPENVINO, per_channel=options.per_channel),)


def fallbacks(options: QuantizeOptions) -> tuple[QuantizeOptions, ...]:
    """More conservative recipes to try, in order, when `options` trips the accuracy gate (accuracy-driven
    quantization): embeddings kept in FP32, then also 7-bit weights, then also attention kept in FP32. Each is
    slower or larger than the one before, never slower than FP32.

    Embeddings first: a lookup does no arithmetic, so INT8 embeddings only save size (~35 MB on the MiniLM demo
    model), never time, and they cost the most accuracy. Measured on the build-7 demo model's dev split (553
    questions; FP32 F1 71.91): INT8 F1 70.58 with everything quantized, 71.80 with only the embeddings kept in FP32,
    70.63 with 7-bit weights, 70.78 with attention kept in FP32; INT8 eval time 8.8 s either way, 11-13 s when
    whole layers or the six FFN output MatMuls are kept in FP32 instead."""
    if options.backend != "onnxruntime" or options.mode != "dynamic":
        return ()

    def kept(*op_types: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*options.fp32_op_types, *op_types)))

    candidates = [
        dataclasses.replace(options, fp32_op_types=kept(*EMBEDDING_OP_TYPES)),
        dataclasses.replace(options, fp32_op_types=kept(*EMBEDDING_OP_TYPES), reduce_range=True),
        dataclasses.replace(options, fp32_op_types=kept(*EMBEDDING_OP_TYPES, "Attention")),
    ]
    return tuple(dict.fromkeys(c for c in candidates if c != options))
