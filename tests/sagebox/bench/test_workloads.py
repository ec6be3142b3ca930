"""What bench sends each task's endpoints and how it scores their answers; per-task relative $/performance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from sagebox.bench.endpoints import EndpointResult, EndpointSpec, table_rows
from sagebox.bench.session import parse_data, parse_endpoints
from sagebox.bench.workloads import QuestionWorkload, RetrievalWorkload, TextWorkload, text_workload
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import GoldAnswer, QAExample


def test_questions_are_sent_bare_and_scored_em_f1() -> None:
    examples = [QAExample("q1", "Who?", "Ann met Bo.", (GoldAnswer("Ann", 0),))]
    work = QuestionWorkload(examples, "test")
    key, body = work.body(3)  # wraps around the set
    assert key == "q1" and json.loads(body) == {"question": "Who?", "context": "Ann met Bo."}
    assert work.score({"q1": work.answer({"answer": "Ann", "score": 0.9})}) == {"em": 100.0, "f1": 100.0}


def test_labelled_texts_are_scored_accuracy_and_macro_f1(tmp_path: Path) -> None:
    data = tmp_path / "sst.jsonl"
    data.write_text('{"text": "great", "label": "pos"}\n{"text": "awful", "label": "neg"}\n')
    work = text_workload("text-classification", data)
    assert json.loads(work.body(1)[1]) == {"inputs": "awful"}
    answers = {"0": work.answer([{"label": "pos", "score": 0.9}]), "1": work.answer([{"label": "pos", "score": 0.6}])}
    assert work.score(answers) == {"accuracy": 50.0, "macro_f1": pytest.approx(100 / 3)}


def test_entities_are_scored_exact_span_and_type(tmp_path: Path) -> None:
    data = tmp_path / "ner.jsonl"
    data.write_text(json.dumps({"text": "Ann in Oslo", "entities": [{"start": 0, "end": 3, "label": "PER"}]}) + "\n")
    work = text_workload("token-classification", data)
    answer = work.answer([{"entity_group": "PER", "score": 0.9, "word": "ann", "start": 0, "end": 3}])
    assert work.score({"0": answer}) == {"entity_f1": 100.0}
    assert isinstance(work, TextWorkload) and work.score({}) == {}


def test_embeddings_score_recall_only_once_every_text_is_embedded(tmp_path: Path) -> None:
    data = tmp_path / "retrieval.jsonl"
    data.write_text('{"query": "a", "positive": "A"}\n{"query": "b", "positive": "B"}\n')
    work = text_workload("feature-extraction", data)
    assert isinstance(work, RetrievalWorkload) and len(work) == 4  # 2 queries, then 2 passages
    vectors = {"0": [1.0, 0.0], "1": [0.0, 1.0], "2": [1.0, 0.1], "3": [0.1, 1.0]}
    assert work.score({k: v for k, v in vectors.items() if k != "3"}) == {}
    assert work.score(vectors) == {"recall_at_10": 100.0}
    unscored = text_workload("feature-extraction", None)
    assert unscored.score({str(i): [1.0] for i in range(len(unscored))}) == {}
    assert "not scored" in unscored.source


def test_relative_cost_compares_rows_of_one_task() -> None:
    class Prices:
        per_hour: ClassVar[dict[str, float]] = {"ml.c6i.2xlarge": 0.34}

    def result(label: str, variant: str, task: str, qps: float) -> EndpointResult:
        r = EndpointResult(EndpointSpec(label, label, "ml.c6i.2xlarge", variant, task))
        r.latencies_s, r.busy_s = list(np.full(int(qps), 0.01)), 1.0
        return r

    rows = table_rows(
        [
            result("qa-fp32", "fp32", "question-answering", 20),
            result("qa-int8", "int8", "question-answering", 40),
            result("emb-int8", "int8", "feature-extraction", 100),
            result("emb-fp32", "fp32", "feature-extraction", 50),
        ],
        Prices(),
        None,
        {"emb-int8": {"recall_at_10": 95.0}},
    )
    by = {r["endpoint"]: r for r in rows}
    assert by["qa-int8"]["relative_cost"] == pytest.approx(0.5) and by["qa-int8"]["baseline"] == "qa-fp32"
    assert by["emb-int8"]["relative_cost"] == pytest.approx(0.5) and by["emb-int8"]["baseline"] == "emb-fp32"
    assert by["emb-int8"]["recall_at_10"] == 95.0 and by["emb-int8"]["task"] == "feature-extraction"


def test_endpoint_and_data_options() -> None:
    [spec] = parse_endpoints(["emb=ml.c6i.xlarge:int8:feature-extraction"])
    assert (spec.variant, spec.task) == ("int8", "feature-extraction")
    assert parse_endpoints(["qa=ml.c6i.xlarge"])[0].task == "question-answering"
    with pytest.raises(SageboxError, match="task 'ner' is not one of"):
        parse_endpoints(["x=ml.c6i.xlarge:int8:ner"])
    assert parse_data(["text-classification=sst.jsonl"]) == {"text-classification": Path("sst.jsonl")}
    with pytest.raises(SageboxError, match="expected TASK=PATH"):
        parse_data(["question-answering=dev.json"])
