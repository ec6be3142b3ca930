"""OpenVINO: an IR (model.xml + model.bin), INT8 by NNCF, on the CPU plugin.

One graph with dynamic shapes takes every batch and sequence length. Beside it, batch-1 graphs compiled for each
sequence bucket's static shape, as long as they fit a memory budget: OpenVINO's CPU plugin infers shapes and plans
memory on every call of a dynamic graph, a near-constant cost that a static graph pays once at compile. Measured
on an Intel Xeon (Ice Lake, AVX-512 VNNI, 2 threads), BERT-base dims NNCF INT8, P50 of one round-robin run: 37.98
(static) against 42.35 ms (dynamic) at 128 tokens, 142.0 against 143.4 at 384; the demo's MiniLM, whose calls are a
few milliseconds, loses relatively more. The price: each compiled graph holds its own repacked weights (~2x the
IR's .bin: 215 MB per BERT-base INT8 graph) and ~1.3 s of compile at load. So small buckets come first (where the
fixed cost weighs most), within SAGEBOX_STATIC_SHAPES_MB (default: an eighth of the memory the container may use).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov

from container.env import memory_bytes
from container.handlers.base import HandlerError, ModelInputs, RuntimeOptions
from container.manifest import Manifest

log = logging.getLogger("sagebox.predictor")

# A static graph's resident memory over its IR's weights file (measured: 215 MB per BERT-base graph, .bin 110 MB).
STATIC_GRAPH_BYTES_PER_WEIGHT_BYTE = 2.0
DEFAULT_STATIC_SHARE = 1 / 8


def compile_config(runtime: RuntimeOptions) -> dict[str, Any]:
    """The CPU plugin's settings: the server makes one call at a time (its window batcher forms the batches), so one
    stream using every intra-op thread; the LATENCY hint (THROUGHPUT would split the threads into streams that only
    parallel requests fill). Denormal flushing as the server's other runtimes do it."""
    return {
        "INFERENCE_NUM_THREADS": runtime.threads,
        "NUM_STREAMS": 1,
        "PERFORMANCE_HINT": "LATENCY",
        "CPU_DENORMALS_OPTIMIZATION": runtime.flush_denormals,
    }


def static_buckets(buckets: Sequence[int], weight_bytes: int, budget_bytes: int) -> list[int]:
    """The buckets that get a static batch-1 graph: the smallest first, while their estimated memory fits."""
    each = int(weight_bytes * STATIC_GRAPH_BYTES_PER_WEIGHT_BYTE)
    chosen: list[int] = []
    for bucket in sorted(buckets):
        if each * (len(chosen) + 1) > budget_bytes:
            break
        chosen.append(bucket)
    return chosen


class OpenVinoHandler:
    def __init__(self) -> None:
        self._dynamic: Any = None  # ov.InferRequest
        self._static: dict[int, Any] = {}  # bucket -> ov.InferRequest of a [1, bucket] graph
        self._input_names: list[str] = []

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        core = ov.Core()
        path = model_dir / manifest.model_file
        config = compile_config(runtime)
        try:
            model = core.read_model(str(path))
            self._input_names = [port.get_any_name() for port in model.inputs]
            self._dynamic = core.compile_model(model, "CPU", config).create_infer_request()
            budget = (
                runtime.static_shapes_mb << 20
                if runtime.static_shapes_mb is not None
                else int(memory_bytes() * DEFAULT_STATIC_SHARE)
            )
            weights = path.with_suffix(".bin")
            size = weights.stat().st_size if weights.is_file() else path.stat().st_size
            # The dynamic graph takes every batch above one: its first call (the largest bucket) runs here.
            longest = manifest.sequence_buckets[-1]
            self._dynamic.infer({name: _filler(name, longest) for name in self._input_names})
            for bucket in static_buckets(manifest.sequence_buckets, size, budget):
                shaped = model.clone()
                shaped.reshape({name: ov.PartialShape([1, bucket]) for name in self._input_names})
                self._static[bucket] = core.compile_model(shaped, "CPU", config).create_infer_request()
        except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
            raise HandlerError(
                f"OpenVINO cannot load {manifest.model_file}: {str(exc).strip().splitlines()[0]}"
            ) from None
        log.info(
            "openvino: one dynamic graph, static batch-1 graphs for buckets %s (budget %d MB)",
            sorted(self._static),
            budget >> 20,
        )

    @property
    def static_shapes(self) -> list[int]:
        return sorted(self._static)

    def warm_up_buckets(self, buckets: Sequence[int]) -> list[int]:
        """Every bucket with a static graph (each runs its first call slowly), and the smallest and largest bucket
        (the dynamic graph's, where they have no static graph)."""
        return sorted({*self._static, buckets[0], buckets[-1]})

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, ...]:
        if self._dynamic is None:
            raise HandlerError("predict() called before load()")
        batch, seq = inputs["input_ids"].shape
        request = self._static.get(seq, self._dynamic) if batch == 1 else self._dynamic
        results = request.infer({name: inputs[name] for name in self._input_names})
        return tuple(np.asarray(results[port], dtype=np.float32) for port in request.model_outputs)


def _filler(name: str, length: int) -> np.ndarray:
    """A warm-up input: every token attended to, ids and segments zero."""
    return np.ones((1, length), np.int64) if name == "attention_mask" else np.zeros((1, length), np.int64)
