"""The shipped all-MiniLM-L6-v2 as a sentence-embedding model (what `make demo` deploys as c6i-embeddings): its INT8
keeps cosine >= 0.99 to FP32 and recall@10 within a point on the hand-made query/passage set of tests/data, and
FP32 answers as sentence-transformers itself does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from container.predictor import Predictor
from sagebox.box.artifacts import RETRIEVAL
from sagebox.demo.models import minilm_source_dir
from sagebox.pipeline.data.task_data import load_retrieval
from sagebox.pipeline.quantize.options import QuantizeOptions, fallbacks
from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize

pytestmark = pytest.mark.slow


def test_minilm_int8_embeddings_pass_the_gate_on_the_retrieval_set(tmp_path: Path) -> None:
    outcome = run_quantize(
        QuantizeRequest(
            model=minilm_source_dir(),
            out=tmp_path / "minilm",
            eval_data=RETRIEVAL,
            threads=2,
            fallbacks=fallbacks(QuantizeOptions()),
        )
    )
    assert outcome.task == "feature-extraction" and outcome.gate.passed and outcome.gate.labelled
    cosine, recall = outcome.gate.checks
    assert cosine.name == "mean cosine(INT8, FP32)" and cosine.int8 >= 0.99
    assert recall.name == "recall@10" and recall.drop <= 1.0 and recall.fp32 >= 90.0
    manifest = outcome.fp32_manifest
    assert manifest.pooling is not None and manifest.pooling.modes == ["mean"] and manifest.pooling.normalize
    assert manifest.sequence_buckets[-1] == 256  # sentence_bert_config.json's max_seq_length

    from sentence_transformers import SentenceTransformer

    data = load_retrieval(RETRIEVAL)
    texts = list(data.queries[:16])
    reference = SentenceTransformer(str(minilm_source_dir()), device="cpu").encode(texts, convert_to_numpy=True)
    predictor = Predictor.load(tmp_path / "minilm" / "fp32")
    served = np.stack([r.values for r in predictor.infer(texts)])
    cosines = (reference * served).sum(axis=1) / np.linalg.norm(reference, axis=1) / np.linalg.norm(served, axis=1)
    assert cosines.min() >= 0.9999

    # The benchmark's embeddings section times this very build (`sagebox bench`, scripts/bench_models.py; the
    # benchmark's end-to-end test skips the section rather than build the model a second time).
    from sagebox.bench.embeddings import time_model_calls

    timings = time_model_calls(tmp_path / "minilm", threads=1, rounds=2, say=lambda _: None)
    assert set(timings) == {"query_16_tokens", "sentence"}
    assert timings["query_16_tokens"]["tokens"] == 16  # the query is the 16-token request it is named for
    for row in timings.values():
        assert row["tokens"] <= row["bucket"]
        assert {"fp32", "int8"} <= set(row) and all(row[v]["n"] == 2 for v in ("fp32", "int8"))
        assert row["int8_over_fp32_p50"] == pytest.approx(row["int8"]["p50_ms"] / row["fp32"]["p50_ms"], abs=1e-3)
