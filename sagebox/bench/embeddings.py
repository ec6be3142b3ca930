"""The shipped all-MiniLM-L6-v2 as a sentence-embedding model: FP32 against its gated INT8, side by side.

Built through the same `run_quantize` as `sagebox build --task feature-extraction` (the gate on the hand-made
query/passage set of tests/data/retrieval: mean cosine(INT8, FP32) and recall@10), then each model call timed on the
same windows, interleaved and rotated round by round (sagebox/bench/latency.py): a 16-token request (a search query)
and a sentence of ~40 tokens. The model call is `Predictor.predict_batch`, what the server's inference thread runs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from container.predictor import Predictor, PredictorOptions
from container.tasks.base import Window
from sagebox.bench.latency import interleaved_latency, summarize

Json = dict[str, Any]
QUERY = "how long does it take to renew an expired passport by post in winter"  # 16 tokens with [CLS] and [SEP]
SENTENCE = (
    "The ferry to the island leaves the harbour every two hours in summer, but only three times a day "
    "between October and April."
)


def minilm_embeddings(work: Path, threads: int, rounds: int, say: Callable[[str], None]) -> Json:
    from sagebox.box.artifacts import RETRIEVAL
    from sagebox.demo.models import minilm_source_dir
    from sagebox.pipeline.quantize.options import QuantizeOptions, fallbacks
    from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize

    out = work / "minilm-embeddings"
    say("building the MiniLM embeddings model (FP32, gated INT8)")
    outcome = run_quantize(
        QuantizeRequest(
            model=minilm_source_dir(),
            out=out,
            eval_data=RETRIEVAL if RETRIEVAL.is_file() else None,
            threads=threads,
            task="feature-extraction",
            fallbacks=fallbacks(QuantizeOptions()),
        ),
        say=say,
    )
    section: Json = {"gate": outcome.gate.to_dict(), "attempts": list(outcome.attempts)}
    if not outcome.gate.passed:
        return section
    section["model_call"] = time_model_calls(out, threads, rounds, say)
    section["sizes_bytes"] = dict(outcome.sizes)
    section["method"] = "Predictor.predict_batch on one window, FP32 and INT8 loaded at once, interleaved rounds"
    return section


def time_model_calls(out: Path, threads: int, rounds: int, say: Callable[[str], None]) -> Json:
    """The model call of `out`/fp32 and `out`/int8 (a gated embeddings build) on a query and a sentence, interleaved."""
    predictors = {name: Predictor.load(out / name, PredictorOptions(threads=threads)) for name in ("fp32", "int8")}
    timings: Json = {}
    for label, text in (("query_16_tokens", QUERY), ("sentence", SENTENCE)):
        task = predictors["fp32"].task
        window = task.featurize(text, task.parse_parameters({}))[0]
        assert isinstance(window, Window)  # a feature-extraction task's windows
        runners = {name: partial(p.predict_batch, [window]) for name, p in predictors.items()}
        say(f"timing {label} ({window.length} tokens, bucket {window.bucket}): {rounds} interleaved rounds")
        times = interleaved_latency(runners, rounds, warmup=5)
        rows = {name: summarize(ms) for name, ms in times.items()}
        timings[label] = {
            "tokens": window.length,
            "bucket": window.bucket,
            **rows,
            "int8_over_fp32_p50": round(rows["int8"]["p50_ms"] / rows["fp32"]["p50_ms"], 3),
        }
    for predictor in predictors.values():
        predictor.close()
    return timings
