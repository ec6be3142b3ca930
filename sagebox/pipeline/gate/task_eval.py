"""What the INT8 gate measures, per task, through the serving predictor (what the endpoint runs).

A judge holds the gate's data (read and checked before any work starts) and knows its task's metric:
- question-answering: SQuAD EM/F1 on labelled data (`--eval`, SQuAD v1.1 JSON);
- text-classification: accuracy and macro-F1 (JSON Lines or CSV of text/label, text_pair for NLI pairs);
- token-classification: entity F1, exact span and type (seqeval-style);
- feature-extraction: mean cosine(INT8, FP32) and recall@10 on a query/passage set.
Without labelled data, INT8 is scored against FP32's own outputs on calibration text (label agreement, entity F1
against FP32's entities, cosine), and the gate says no labelled accuracy was measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from container.predictor import Predictor, PredictorOptions
from sagebox.errors import SageboxError
from sagebox.pipeline.data import builtin, task_data
from sagebox.pipeline.data.builtin import DEFAULT_CALIBRATION_TEXTS
from sagebox.pipeline.gate import task_metrics
from sagebox.pipeline.gate.task_gate import GateLimits, MetricCheck, TaskGate
from sagebox.pipeline.load.hf_task import TaskInfo

CHUNK = 32  # inputs per in-process inference call
MULTI_LABEL_THRESHOLD = 0.5


@dataclass(frozen=True)
class TaskEvaluation:
    """One model directory's scores on the gate's data, and its raw outputs (for the INT8/FP32 comparison)."""

    model_dir: str
    variant: str
    runtime: str
    metrics: dict[str, float]
    seconds: float
    count: int
    outputs: Any = field(repr=False, compare=False)

    def summary(self) -> dict[str, object]:
        return {
            "model_dir": self.model_dir,
            "variant": self.variant,
            "runtime": self.runtime,
            **{name: round(value, 4) for name, value in self.metrics.items()},
            "examples": self.count,
            "seconds": round(self.seconds, 3),
        }


class Judge(Protocol):
    task: str
    labelled: bool
    data: str  # what the gate measures on, for reports

    def calibration_items(self) -> list[Any]:
        """Inputs for static calibration (the task's parsed request inputs)."""
        ...

    def evaluate(self, model_dir: Path, options: PredictorOptions) -> Any:
        """Score one model directory (an Evaluation-like object with `summary()`)."""
        ...

    def gate(self, fp32: Any, int8: Any, limits: GateLimits) -> Any:
        """The gate's verdict (`passed`, `message()`, `to_dict()`)."""
        ...


def infer_all(predictor: Predictor, items: Sequence[Any], params: Any = None) -> list[Any]:
    out: list[Any] = []
    for first in range(0, len(items), CHUNK):
        out.extend(predictor.infer(items[first : first + CHUNK], params))
    return out


def _timed(
    model_dir: Path,
    options: PredictorOptions,
    run: Callable[[Predictor], tuple[dict[str, float], int, Any]],
    clock: Callable[[], float] = time.monotonic,
) -> TaskEvaluation:
    predictor = Predictor.load(Path(model_dir), options)
    try:
        started = clock()
        metrics, count, outputs = run(predictor)
        elapsed = clock() - started
    finally:
        predictor.close()
    manifest = predictor.manifest
    return TaskEvaluation(str(model_dir), manifest.variant, manifest.runtime, metrics, elapsed, count, outputs)


# --- text classification ----------------------------------------------------------------------------------------------


class ClassificationJudge:
    task = "text-classification"

    def __init__(self, info: TaskInfo, data: task_data.ClassificationData | None, texts: Sequence[str], source: str):
        from container.tasks.classification import TextInput

        assert info.labels is not None
        self.labels = info.labels
        self.multi_label = info.problem_type == "multi_label_classification"
        self.regression = info.problem_type == "regression"
        self.labelled = data is not None and not self.regression
        if data is not None:
            if data.multi_label != self.multi_label:
                kind = "multi-label" if data.multi_label else "single-label"
                raise SageboxError(f"{source} holds {kind} examples; the model is {info.problem_type}")
            named = data.named(dict(enumerate(self.labels)))
            self.gold = [frozenset(e.labels) for e in named.examples]
            self.items = [TextInput(e.text, e.text_pair) for e in named.examples]
        else:
            self.gold = []
            self.items = [TextInput(text) for text in texts]
        self.data = source

    def calibration_items(self) -> list[Any]:
        return list(self.items)

    def _predicted(self, scores: np.ndarray) -> frozenset[str]:
        if self.multi_label:
            return frozenset(self.labels[i] for i in np.flatnonzero(scores >= MULTI_LABEL_THRESHOLD))
        return frozenset({self.labels[int(scores.argmax())]})

    def evaluate(self, model_dir: Path, options: PredictorOptions) -> TaskEvaluation:
        def run(predictor: Predictor) -> tuple[dict[str, float], int, Any]:
            scores = np.stack([r.values for r in infer_all(predictor, self.items)])
            predicted = [self._predicted(row) for row in scores]
            metrics: dict[str, float] = {}
            if self.labelled:
                metrics = self._scores(self.gold, predicted)
            return metrics, len(self.items), (scores, predicted)

        return _timed(model_dir, options, run)

    def _scores(self, gold: Sequence[frozenset[str]], predicted: Sequence[frozenset[str]]) -> dict[str, float]:
        if self.multi_label:
            score = task_metrics.multilabel_scores(gold, predicted, self.labels)
        else:
            score = task_metrics.classification_scores(
                [next(iter(g)) for g in gold], [next(iter(p)) for p in predicted]
            )
        return {"accuracy": score.accuracy, "macro-F1": score.macro_f1}

    def gate(self, fp32: TaskEvaluation, int8: TaskEvaluation, limits: GateLimits) -> TaskGate:
        if self.regression:
            reference = np.abs(fp32.outputs[0]).mean() or 1.0
            error = float(np.abs(fp32.outputs[0] - int8.outputs[0]).mean() / reference * 100.0)
            check = MetricCheck("mean relative error (% of |FP32|)", 0.0, -error, limits.max_drop)
            return TaskGate(self.task, (check,), False, self.data)
        if self.labelled:
            checks = tuple(
                MetricCheck(name, fp32.metrics[name], int8.metrics[name], limits.max_drop)
                for name in ("accuracy", "macro-F1")
            )
            return TaskGate(self.task, checks, True, self.data)
        agreement = self._scores(fp32.outputs[1], int8.outputs[1])["accuracy"]
        check = MetricCheck("label agreement with FP32", 100.0, agreement, limits.max_drop, "agreement")
        return TaskGate(self.task, (check,), False, self.data)


# --- token classification ---------------------------------------------------------------------------------------------


class EntityJudge:
    task = "token-classification"

    def __init__(self, data: task_data.EntityData | None, texts: Sequence[str], source: str) -> None:
        self.labelled = data is not None
        self.items = [e.text for e in data.examples] if data is not None else list(texts)
        self.gold = [list(e.spans) for e in data.examples] if data is not None else []
        self.data = source

    def calibration_items(self) -> list[Any]:
        return list(self.items)

    def evaluate(self, model_dir: Path, options: PredictorOptions) -> TaskEvaluation:
        def run(predictor: Predictor) -> tuple[dict[str, float], int, Any]:
            results = infer_all(predictor, self.items)
            spans = [[(e["start"], e["end"], e["entity_group"]) for e in entities] for entities in results]
            metrics: dict[str, float] = {}
            if self.labelled:
                metrics = {"entity F1": task_metrics.entity_scores(self.gold, spans).f1}
            return metrics, len(self.items), spans

        return _timed(model_dir, options, run)

    def gate(self, fp32: TaskEvaluation, int8: TaskEvaluation, limits: GateLimits) -> TaskGate:
        if self.labelled:
            check = MetricCheck("entity F1", fp32.metrics["entity F1"], int8.metrics["entity F1"], limits.max_drop)
            return TaskGate(self.task, (check,), True, self.data)
        agreement = _entity_agreement(fp32.outputs, int8.outputs)
        check = MetricCheck("entity F1 against FP32's entities", 100.0, agreement, limits.max_drop, "agreement")
        return TaskGate(self.task, (check,), False, self.data)


def _entity_agreement(fp32: Sequence[Sequence[Any]], int8: Sequence[Sequence[Any]]) -> float:
    if not any(fp32) and not any(int8):
        return 100.0  # both found nothing anywhere: they agree
    return task_metrics.entity_scores(fp32, int8).f1


# --- feature extraction -----------------------------------------------------------------------------------------------


class EmbeddingJudge:
    task = "feature-extraction"

    def __init__(self, data: task_data.RetrievalData | None, texts: Sequence[str], source: str) -> None:
        self.labelled = data is not None
        self.retrieval = data
        if data is not None:
            self.items = [*data.queries, *data.passages]
        else:
            self.items = list(texts)
        self.data = source

    def calibration_items(self) -> list[Any]:
        return list(self.items)

    def evaluate(self, model_dir: Path, options: PredictorOptions) -> TaskEvaluation:
        def run(predictor: Predictor) -> tuple[dict[str, float], int, Any]:
            vectors = np.stack([r.values for r in infer_all(predictor, self.items)])
            metrics: dict[str, float] = {}
            if self.retrieval is not None:
                queries = vectors[: len(self.retrieval.queries)]
                passages = vectors[len(self.retrieval.queries) :]
                metrics = {"recall@10": task_metrics.recall_at_k(queries, passages, self.retrieval.relevant, 10)}
            return metrics, len(self.items), vectors

        return _timed(model_dir, options, run)

    def gate(self, fp32: TaskEvaluation, int8: TaskEvaluation, limits: GateLimits) -> TaskGate:
        cosine = task_metrics.mean_cosine(fp32.outputs, int8.outputs)
        checks = [MetricCheck("mean cosine(INT8, FP32)", 1.0, cosine, limits.min_cosine, "floor")]
        if self.labelled:
            checks.append(
                MetricCheck("recall@10", fp32.metrics["recall@10"], int8.metrics["recall@10"], limits.max_drop)
            )
        return TaskGate(self.task, tuple(checks), self.labelled, self.data)


# --- question answering -----------------------------------------------------------------------------------------------


class QAJudge:
    """SQuAD EM/F1 on labelled data (today's gate, unchanged); without it, F1 of INT8's answers against FP32's."""

    task = "question-answering"

    def __init__(self, examples: Sequence[Any], labelled: bool, source: str) -> None:
        self.examples = list(examples)
        self.labelled = labelled
        self.data = source

    def calibration_items(self) -> list[Any]:
        from container.tasks.question_answering import Question

        return [Question(e.question, e.context) for e in self.examples]

    def evaluate(self, model_dir: Path, options: PredictorOptions) -> Any:
        from sagebox.pipeline.gate.evaluate import evaluate_model_dir, predict_all

        if self.labelled:
            return evaluate_model_dir(model_dir, self.examples, options)

        def run(predictor: Predictor) -> tuple[dict[str, float], int, Any]:
            predictions, _ = predict_all(predictor, self.examples)
            return {}, len(self.examples), predictions

        return _timed(model_dir, options, run)

    def gate(self, fp32: Any, int8: Any, limits: GateLimits) -> Any:
        from sagebox.pipeline.data.squad import GoldAnswer, QAExample
        from sagebox.pipeline.gate.accuracy_gate import check_gate
        from sagebox.pipeline.gate.squad_metric import score

        if self.labelled:
            return check_gate(fp32.score, int8.score, limits.max_drop)
        as_gold = [
            QAExample(e.id, e.question, e.context, (GoldAnswer(fp32.outputs.get(e.id, ""), 0),)) for e in self.examples
        ]
        agreement = score(as_gold, int8.outputs).f1
        check = MetricCheck("answer F1 against FP32's answers", 100.0, agreement, limits.max_drop, "agreement")
        return TaskGate(self.task, (check,), False, self.data)


# --- choosing ---------------------------------------------------------------------------------------------------------


def judge_for(info: TaskInfo, eval_data: Path | None, calibration_data: Path | None) -> Judge:
    """The task's judge with its data loaded and checked (a bad file is one error line before any work)."""
    if info.task == "question-answering":
        from sagebox.pipeline.data.squad import load_squad

        if eval_data is not None:
            return QAJudge(load_squad(eval_data, require_answers=True), True, str(eval_data))
        if calibration_data is not None:
            examples = load_squad(calibration_data, require_answers=False)
            return QAJudge(examples, False, f"{calibration_data} (no --eval: INT8's answers against FP32's)")
        examples = builtin.qa_examples(DEFAULT_CALIBRATION_TEXTS)
        where = f"Sagebox's built-in QA corpus ({len(examples)} questions; no --eval data)"
        return QAJudge(examples, False, where)
    texts: list[str] = []
    if eval_data is None:
        if calibration_data is not None:
            texts = list(task_data.load_texts(calibration_data, limit=DEFAULT_CALIBRATION_TEXTS * 5))
            source = f"{calibration_data} (no --eval data: INT8 compared with FP32 on {len(texts)} calibration texts)"
        else:
            texts = builtin.calibration_texts()
            source = f"Sagebox's built-in calibration text ({len(texts)} sentences; no --eval data)"
    else:
        source = str(eval_data)
    if info.task == "text-classification":
        data = task_data.load_classification(eval_data) if eval_data is not None else None
        return ClassificationJudge(info, data, texts, source)
    if info.task == "token-classification":
        entities = None
        if eval_data is not None:
            entities = task_data.load_entities(eval_data, label_names=list(info.labels or ()))
        return EntityJudge(entities, texts, source)
    retrieval = task_data.load_retrieval(eval_data) if eval_data is not None else None
    return EmbeddingJudge(retrieval, texts, source)
