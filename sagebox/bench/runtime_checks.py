"""Side-by-side measurements behind the ONNX Runtime serving choices (container/handlers/onnx.py):

- residual adds kept apart from layer norms: SkipLayerNormalization vs Add + LayerNormalization;
- intra-op threads spinning within a call, and denormals flushed to zero, on a padded request.

Each returns plain JSON for scripts/bench_models.py; timings are interleaved so noise hits every candidate alike.
`runtime_options` must run in a process whose main thread has loaded no model (flush-to-zero is inherited by
new threads): `python -m sagebox.bench.runtime_checks MODEL_DIR BUCKET THREADS` runs it in a fresh one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from container.handlers.onnx import open_session
from container.predictor import Predictor, PredictorOptions
from container.qa import Feature
from container.tasks.question_answering import qa_processor
from sagebox.bench.latency import interleaved_latency, summarize

Json = dict[str, Any]


def _norm_graph(skip: bool, seq: int, hidden: int) -> bytes:
    from onnx import TensorProto, helper

    gamma = helper.make_tensor("gamma", TensorProto.FLOAT, [hidden], np.ones(hidden, np.float32))
    beta = helper.make_tensor("beta", TensorProto.FLOAT, [hidden], np.zeros(hidden, np.float32))
    if skip:
        nodes = [
            helper.make_node(
                "SkipLayerNormalization", ["x", "r", "gamma", "beta"], ["y"], domain="com.microsoft", epsilon=1e-12
            )
        ]
    else:
        nodes = [
            helper.make_node("Add", ["x", "r"], ["sum"]),
            helper.make_node("LayerNormalization", ["sum", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-12),
        ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, seq, hidden]) for n in ("x", "r")]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])
    graph = helper.make_graph(nodes, "norm", inputs, [output], [gamma, beta])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


def layer_norm_kernels(seq: int, hidden: int, threads: int, rounds: int = 200) -> Json:
    """Microseconds per call of the fused SkipLayerNormalization kernel and of Add + LayerNormalization (kept
    unfused the way the serving handler keeps them), same inputs."""
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    feed = {n: rng.standard_normal((1, seq, hidden), dtype=np.float32) for n in ("x", "r")}
    runners: dict[str, Callable[[], object]] = {}
    for name, skip in (("skip_layer_norm", True), ("add_then_layer_norm", False)):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        session = open_session(_norm_graph(skip, seq, hidden), options)
        runners[name] = partial(session.run, None, feed)
    times = interleaved_latency(runners, rounds, warmup=20)
    us = {name: round(float(np.median(ms)) * 1000.0, 1) for name, ms in times.items()}
    return {
        "shape": [1, seq, hidden],
        "threads": threads,
        "p50_us": us,
        "skip_over_unfused": round(us["skip_layer_norm"] / us["add_then_layer_norm"], 2),
    }


def padded_feature(predictor: Predictor, bucket: int, fill: float = 0.75) -> Feature:
    """A `bucket`-long feature whose last quarter is padding, like most real requests."""
    full = qa_processor(predictor.task).filler_feature(bucket)
    length = max(8, int(bucket * fill))
    mask = np.zeros(bucket, dtype=np.int64)
    mask[:length] = 1
    ids = full.input_ids.copy()
    ids[length:] = 0
    return Feature(ids, mask, full.token_type_ids, full.context_mask, full.offsets, length)


def _on(executor: ThreadPoolExecutor, fn: Callable[[], object]) -> object:
    return executor.submit(fn).result()


def runtime_options(model_dir: Path, bucket: int, threads: int, rounds: int = 30) -> Json:
    """P50 of one padded feature under each combination of spin-wait and denormal flushing (the default is
    both on), every combination loaded at once and interleaved."""
    combos = {
        "spin_on_flush_on": PredictorOptions(threads=threads, spin_wait=True, flush_denormals=True),
        "spin_off_flush_on": PredictorOptions(threads=threads, spin_wait=False, flush_denormals=True),
        "spin_on_flush_off": PredictorOptions(threads=threads, spin_wait=True, flush_denormals=False),
        "spin_off_flush_off": PredictorOptions(threads=threads, spin_wait=False, flush_denormals=False),
    }
    # One thread per combination, loading and running there: flush-to-zero is per-thread state that a runtime
    # sets on the loading thread, so combinations sharing a thread would share it.
    threads_by_combo = {name: ThreadPoolExecutor(1, thread_name_prefix=name) for name in combos}
    try:
        predictors = {
            name: threads_by_combo[name].submit(Predictor.load, model_dir, options).result()
            for name, options in combos.items()
        }
        feature = padded_feature(next(iter(predictors.values())), bucket)
        runners: dict[str, Callable[[], object]] = {
            name: partial(_on, threads_by_combo[name], partial(p.predict_batch, [feature]))
            for name, p in predictors.items()
        }
        times = interleaved_latency(runners, rounds, warmup=3)
    finally:
        for executor in threads_by_combo.values():
            executor.shutdown()
    summary = {name: summarize(ms) for name, ms in times.items()}
    default = summary["spin_on_flush_on"]["p50_ms"]
    return {
        "model_dir": str(model_dir),
        "bucket": bucket,
        "tokens": feature.length,
        "threads": threads,
        "variants": summary,
        "p50_over_default": {name: round(s["p50_ms"] / default, 3) for name, s in summary.items()},
    }


def runtime_options_in_child(model_dir: Path, bucket: int, threads: int, rounds: int = 30) -> Json:
    """`runtime_options` in a fresh interpreter, so no earlier load in this process decides its threads' flags."""
    import subprocess

    args = [sys.executable, "-m", "sagebox.bench.runtime_checks", str(model_dir), str(bucket), str(threads)]
    out = subprocess.run([*args, str(rounds)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    result: Json = json.loads(out.stdout)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (3, 4):
        print("usage: python -m sagebox.bench.runtime_checks MODEL_DIR BUCKET THREADS [ROUNDS]", file=sys.stderr)
        return 2
    rounds = int(args[3]) if len(args) == 4 else 30
    print(json.dumps(runtime_options(Path(args[0]), int(args[1]), int(args[2]), rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
