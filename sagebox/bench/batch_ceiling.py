"""How much a micro-batcher can possibly gain on this machine: the model's per-sample time in a batch vs alone.

A server that batches concurrent requests can beat a sequential client by no more than the model's own
batch gain (plus the per-request HTTP and tokenizing work it overlaps). Measured in-process, interleaved:

- `batch_gain`: per-sample milliseconds alone and in batches of several sizes, per sequence bucket (what the
  server's per-call token budget, SAGEBOX_MAX_BATCH_TOKENS, is chosen from);
- `op_gain_by_type` (ONNX Runtime models): the same split by operator type from ORT's profiler, which shows
  which kernels gain from a larger batch and which are already at their best alone.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from container.handlers.base import MODEL_INPUTS, RuntimeOptions
from container.handlers.onnx import open_session, session_options
from container.predictor import Predictor
from sagebox.bench.latency import interleaved_latency

Json = dict[str, Any]


def batch_gain(predictor: Predictor, buckets: Iterable[int], batches: Sequence[int], rounds: int = 6) -> Json:
    """Per bucket: P50 milliseconds per sample alone and in batches of each size, and the gain over alone."""
    result: Json = {"batches": list(batches), "buckets": {}}
    for bucket in buckets:
        feature = predictor.task.filler_feature(bucket)
        runners = {"1": partial(predictor.predict_batch, [feature])}
        runners.update({str(n): partial(predictor.predict_batch, [feature] * n) for n in batches})
        times = interleaved_latency(runners, rounds, warmup=2)
        alone = float(np.median(times["1"]))
        batched = {}
        for n in batches:
            per_sample = float(np.median(times[str(n)])) / n
            batched[str(n)] = {"ms_per_sample": round(per_sample, 4), "gain": round(alone / per_sample, 3)}
        result["buckets"][str(bucket)] = {"ms_per_sample_alone": round(alone, 4), "batched": batched}
    return result


def op_time_by_run(events: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Kernel microseconds per operator type for each `model_run` in an ORT profile, in run order."""
    runs = sorted((e for e in events if e.get("name") == "model_run"), key=lambda e: e["ts"])
    totals: list[dict[str, float]] = [defaultdict(float) for _ in runs]
    starts = [r["ts"] for r in runs]
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        index = int(np.searchsorted(starts, event["ts"], side="right")) - 1
        if index >= 0 and event["ts"] <= runs[index]["ts"] + runs[index]["dur"]:
            totals[index][event["args"]["op_name"]] += float(event["dur"])
    return [dict(t) for t in totals]


def op_gain_by_type(model_file: Path, feed: Mapping[str, np.ndarray], batch: int, threads: int, runs: int = 4) -> Json:
    """Per operator type: kernel ms per sample alone and in a batch of `batch` (ORT's profiler on a session opened
    the way the server opens it)."""
    options = session_options(RuntimeOptions(threads))
    options.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="sagebox-profile-") as tmp:
        options.profile_file_prefix = os.path.join(tmp, "ort")
        session = open_session(model_file, options)
        names = {i.name for i in session.get_inputs()}
        alone = {k: v[None, :] for k, v in feed.items() if k in names}
        batched = {k: np.repeat(v, batch, axis=0) for k, v in alone.items()}
        order = [alone, batched] * (runs + 1)  # the first pair warms up and is dropped
        for inputs in order:
            session.run(None, inputs)
        events = json.loads(Path(session.end_profiling()).read_text())
    per_run = op_time_by_run(events)[2:]
    if len(per_run) != 2 * runs:
        raise RuntimeError(f"the profile holds {len(per_run) + 2} model runs, expected {len(order)}")
    per_sample: dict[str, tuple[float, float]] = {}
    for op in {op for run in per_run for op in run}:
        alone_ms = float(np.median([run.get(op, 0.0) for run in per_run[0::2]])) / 1000.0
        batched_ms = float(np.median([run.get(op, 0.0) for run in per_run[1::2]])) / 1000.0 / batch
        per_sample[op] = (alone_ms, batched_ms)
    ops = {
        op: {
            "ms_per_sample_alone": round(alone_ms, 3),
            "ms_per_sample_batched": round(batched_ms, 3),
            "gain": round(alone_ms / batched_ms, 3) if batched_ms > 0 else None,
        }
        for op, (alone_ms, batched_ms) in sorted(per_sample.items(), key=lambda item: -item[1][0])
    }
    return {"batch": batch, "threads": threads, "runs": runs, "ops": ops}


def model_ceiling(
    predictor: Predictor,
    model_dir: Path,
    buckets: Sequence[int],
    batches: Sequence[int],
    threads: int,
    profile_bucket: int,
) -> Json:
    """`batch_gain` over `buckets`, and for an ONNX Runtime model the per-operator split at `profile_bucket` for
    the largest batch."""
    result: Json = {"threads": threads, **batch_gain(predictor, buckets, batches)}
    manifest = predictor.manifest
    if manifest.runtime == "onnxruntime":
        feature = predictor.task.filler_feature(profile_bucket)
        feed = dict(zip(MODEL_INPUTS, (feature.input_ids, feature.attention_mask, feature.token_type_ids), strict=True))
        result["ops_at_bucket"] = profile_bucket
        result["op_gain"] = op_gain_by_type(model_dir / manifest.model_file, feed, max(batches), threads)
    return result
