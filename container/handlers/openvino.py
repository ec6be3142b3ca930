"""OpenVINO: an IR (model.xml + model.bin), INT8 by NNCF, on the CPU plugin.

One graph with dynamic shapes takes every batch and sequence length. Beside it, batch-1 graphs compiled for each
sequence bucket's static shape, as long as they fit a memory budget: OpenVINO's CPU plugin infers shapes and plans
memory on every call of a dynamic graph, a near-constant cost that a static graph pays once at compile. Measured
on an Intel Xeon (Ice Lake, AVX-512 VNNI, 2 threads), BERT-base dims NNCF INT8, P50 of one round-robin run: 37.98
(static) against 42.35 ms (dynamic) at 128 tokens, 142.0 against 143.4 at 384; the demo's MiniLM, whose calls are a
few milliseconds, loses relatively more. The price: each compiled graph holds its own repacked weights (~2x the
IR's .bin: 215 MB per BERT-base INT8 graph) and compile time (1.3 s each for BERT-base, 0.55 s for the demo MiniLM,
whose static graphs were 13-21 % faster than the dynamic one at 64-384 tokens). So small buckets come first (where
the fixed cost weighs most), within SAGEBOX_STATIC_SHAPES_MB (default: an eighth of the memory the container may
use). A server (RuntimeOptions.background_compile) is ready on the dynamic graph and compiles a bucket's static graph
in the background once requests of that length arrive; offline evaluation and benchmarks compile them all at load.
"""

from __future__ import annotations

import logging
import queue
import threading
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
    parallel requests fill). Denormal flushing as the server's other runtimes do it. Float precision pinned to f32:
    on a CPU with avx512_bf16 or AMX the plugin's default is bf16 for every op NNCF left in float (softmax, layer norm,
    GELU, the unquantized matmuls), so the served numerics would differ from what the build gated by CPU kind, and
    the dynamic and static graphs disagree with each other (machine A, AMD EPYC with avx512_bf16: the outlier-head
    test model's logits 1222.3 against 1234.5, 1 %, where f32 graphs agree within 1e-3)."""
    return {
        "INFERENCE_PRECISION_HINT": "f32",
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
        self._compiler: threading.Thread | None = None
        self._queue: queue.Queue[int] = queue.Queue()
        self._lazy: set[int] = set()  # buckets whose static graph a request will ask for
        self._seen: set[int] = set()
        self._build: tuple[Any, Any, dict[str, Any]] = (None, None, {})

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        core = ov.Core()
        path = model_dir / manifest.model_file
        config = compile_config(runtime)
        try:
            model = core.read_model(str(path))
            self._input_names = [port.get_any_name() for port in model.inputs]
            self._dynamic = core.compile_model(model, "CPU", config).create_infer_request()
            # The dynamic graph takes every batch above one: its first call (the largest bucket) runs here.
            self._dynamic.infer(self._fillers(manifest.sequence_buckets[-1]))
        except Exception as exc:  # OpenVINO raises RuntimeError with multi-line messages
            raise HandlerError(f"OpenVINO cannot load {manifest.model_file}: {_first_line(exc)}") from None
        budget = (
            runtime.static_shapes_mb << 20
            if runtime.static_shapes_mb is not None
            else int(memory_bytes() * DEFAULT_STATIC_SHARE)
        )
        weights = path.with_suffix(".bin")
        size = weights.stat().st_size if weights.is_file() else path.stat().st_size
        planned = static_buckets(manifest.sequence_buckets, size, budget)
        log.info(
            "openvino: one dynamic graph; static batch-1 graphs for buckets %s (budget %d MB)%s",
            planned,
            budget >> 20,
            ", each compiled in the background once a request needs it" if runtime.background_compile else "",
        )
        self._build = (core, model, config)
        if runtime.background_compile:
            # Ready on the dynamic graph at once (~0.5 s of compile for the demo MiniLM instead of ~4.4 s for nine
            # graphs), and a bucket's static graph is compiled only once a request of that length arrives: a server
            # whose traffic uses two buckets spends two compiles, not eight (the box starts many serving processes).
            self._lazy = set(planned)
        else:
            for bucket in planned:
                self._compile_static(bucket)

    def _compile_static(self, bucket: int) -> None:
        core, model, config = self._build
        try:
            shaped = model.clone()
            shaped.reshape({name: ov.PartialShape([1, bucket]) for name in self._input_names})
            request = core.compile_model(shaped, "CPU", config).create_infer_request()
            request.infer(self._fillers(bucket))  # its slow first call, before any request sees it
        except Exception as exc:  # the dynamic graph keeps serving this bucket
            log.warning("openvino: no static graph for bucket %d: %s", bucket, _first_line(exc))
            return
        self._static[bucket] = request  # one dict store: the inference thread sees it whole or not at all

    def _compile_in_background(self) -> None:
        while True:
            bucket = self._queue.get()
            try:
                self._compile_static(bucket)
            finally:
                self._queue.task_done()

    def _ask_for(self, bucket: int) -> None:
        """On the inference thread: queue the bucket's static graph (once), starting the compiling thread."""
        self._lazy.discard(bucket)
        if self._compiler is None:
            self._compiler = threading.Thread(target=self._compile_in_background, name="openvino-static", daemon=True)
            self._compiler.start()
        self._queue.put(bucket)

    def wait_for_static_graphs(self) -> None:
        """Until every static graph asked for so far is compiled (benchmarks and tests time settled graphs)."""
        self._queue.join()

    def _fillers(self, length: int) -> dict[str, np.ndarray]:
        return {name: _filler(name, length) for name in self._input_names}

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
        if batch == 1 and seq in self._lazy:
            # The second call of a length asks (the first may be the load's warm-up, which serves no one).
            if seq in self._seen:
                self._ask_for(seq)
            self._seen.add(seq)
        request = self._static.get(seq, self._dynamic) if batch == 1 else self._dynamic
        results = request.infer({name: inputs[name] for name in self._input_names})
        return tuple(np.asarray(results[port], dtype=np.float32) for port in request.model_outputs)


def _filler(name: str, length: int) -> np.ndarray:
    """A warm-up input: every token attended to, ids and segments zero."""
    return np.ones((1, length), np.int64) if name == "attention_mask" else np.zeros((1, length), np.int64)


def _first_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
