"""ONNX Runtime: an exported (optionally quantized) graph with inputs named like the tokenizer's outputs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort

from container.handlers.base import HandlerError, ModelInputs, RuntimeOptions
from container.manifest import Manifest

# The CPU kernel of SkipLayerNormalization is several times slower than Add + LayerNormalization in ONNX Runtime
# 1.32 (236 vs 37 us at [1, 128, 384], one thread): keep residual adds and layer norms apart. Measured by
# scripts/bench_models.py ("layer_norm_kernels").
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)


def session_options(runtime: RuntimeOptions) -> ort.SessionOptions:
    """The serving session's options (benchmarks that profile the served model start from these)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = runtime.threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if runtime.spin_wait else "0")
    # Spin between the ops of a call, not after it: an idle endpoint leaves its CPUs to the HTTP loop, the
    # tokenizer and its neighbours (interleaved in one process, spinning sessions otherwise slow each other 2x).
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.add_session_config_entry("session.set_denormal_as_zero", "1" if runtime.flush_denormals else "0")
    return options


def open_session(model: Path | bytes, options: ort.SessionOptions) -> ort.InferenceSession:
    """An ONNX Runtime CPU session (from a file or serialized bytes) with the serving graph optimizations
    (SkipLayerNormFusion disabled)."""
    source = str(model) if isinstance(model, Path) else model
    return ort.InferenceSession(
        source, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_OPTIMIZERS)
    )


class OnnxRuntimeHandler:
    def __init__(self) -> None:
        self._session: ort.InferenceSession | None = None
        self._input_names: list[str] = []

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        try:
            self._session = open_session(model_dir / manifest.model_file, session_options(runtime))
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise HandlerError(f"ONNX Runtime cannot load {manifest.model_file}: {str(exc).splitlines()[0]}") from None
        self._input_names = [i.name for i in self._session.get_inputs()]

    def warm_up_buckets(self, buckets: Sequence[int]) -> list[int]:
        """The smallest and the largest bucket. One graph takes every length: once the largest has run (its buffers
        are the largest), every bucket's first call runs as fast as its later ones. INT8 demo MiniLM, 2-core EPYC,
        three runs each, each bucket's first call over the median of its next seven: 0.89-1.18 after these two,
        0.88-1.17 after all eight buckets (a single call's noise); a first 384-token call with no warm-up at all,
        1.22. The smallest runs too, so that admission prices short requests from a measured call rather than the
        largest scaled down (container/admission.py). Warm-up: ~40 ms instead of ~130 ms (INT8)."""
        return sorted({buckets[0], buckets[-1]})

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, ...]:
        if self._session is None:
            raise HandlerError("predict() called before load()")
        feed = {name: inputs[name] for name in self._input_names}
        return tuple(np.asarray(output, dtype=np.float32) for output in self._session.run(None, feed))
