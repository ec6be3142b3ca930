"""Accuracy metrics of the encoder tasks beyond extractive QA, as the usual reference tools compute them, so a number
Sagebox prints can be compared with a model card's:

- text classification: accuracy and macro-F1 (scikit-learn's `f1_score(average="macro")` over the labels that occur,
  zero_division=0); multi-label: exact-set accuracy and macro-F1 over the model's labels;
- token classification: seqeval's micro-averaged entity precision/recall/F1 (exact (start, end, type) matches), and
  seqeval's default chunking of BIO tags (sagebox/pipeline/data/spans.py);
- embeddings: mean cosine between two runtimes' vectors, and retrieval recall@k.

Pure functions over plain values (numpy only), so the serving image and the CLI can share them without a model.
Scores are percentages (0-100), as the SQuAD metric's are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from sagebox.pipeline.data.spans import Span

_ROUND = 4
_QUERY_CHUNK = 1024  # queries scored at once by recall_at_k: bounds the similarity matrix's memory


def _rounded(values: dict[str, float | int]) -> dict[str, float | int]:
    return {key: round(value, _ROUND) if isinstance(value, float) else value for key, value in values.items()}


@dataclass(frozen=True)
class ClassificationScore:
    accuracy: float  # percent
    macro_f1: float  # percent
    total: int

    def to_dict(self) -> dict[str, float | int]:
        return _rounded(asdict(self))


@dataclass(frozen=True)
class EntityScore:
    precision: float  # percent
    recall: float  # percent
    f1: float  # percent
    gold_entities: int
    predicted_entities: int
    total: int  # examples

    def to_dict(self) -> dict[str, float | int]:
        return _rounded(asdict(self))


def _check_pairs(gold: Sequence[object], predicted: Sequence[object]) -> None:
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold examples but {len(predicted)} predictions")
    if not gold:
        raise ValueError("no examples to score")


def _f1_percent(true_positives: int, false_positives: int, false_negatives: int) -> float:
    """2PR/(P+R) written as 2TP/(2TP+FP+FN): the same value, and 0 where scikit-learn's zero_division=0 gives 0."""
    denominator = 2 * true_positives + false_positives + false_negatives
    return 100.0 * 2 * true_positives / denominator if denominator else 0.0


def classification_scores(gold: Sequence[str], predicted: Sequence[str]) -> ClassificationScore:
    """Accuracy and macro-F1 over every label that occurs in gold or predicted: a label the model predicts but the
    data never holds counts as an F1 of 0, as scikit-learn's macro average over those labels does."""
    _check_pairs(gold, predicted)
    true_positives: Counter[str] = Counter()
    false_positives: Counter[str] = Counter()
    false_negatives: Counter[str] = Counter()
    for expected, got in zip(gold, predicted, strict=True):
        if expected == got:
            true_positives[expected] += 1
        else:
            false_positives[got] += 1
            false_negatives[expected] += 1
    labels = set(gold) | set(predicted)
    f1s = [_f1_percent(true_positives[label], false_positives[label], false_negatives[label]) for label in labels]
    accuracy = 100.0 * sum(true_positives.values()) / len(gold)
    return ClassificationScore(accuracy, sum(f1s) / len(f1s), len(gold))


def multilabel_scores(
    gold: Sequence[frozenset[str]], predicted: Sequence[frozenset[str]], labels: Sequence[str]
) -> ClassificationScore:
    """Exact-set accuracy and macro-F1 over `labels` (the model's label set): a label neither gold nor predicted
    anywhere scores 0 (scikit-learn's zero_division=0), so the label set must be the model's, not a guess."""
    _check_pairs(gold, predicted)
    if not labels:
        raise ValueError("multi-label scoring needs the label set")
    known = set(labels)
    unknown = sorted(set().union(*gold, *predicted) - known)
    if unknown:
        raise ValueError(f"labels {unknown[:5]} are not among the {len(known)} scored labels")
    f1s = []
    for label in known:
        in_gold = [label in labels_ for labels_ in gold]
        in_predicted = [label in labels_ for labels_ in predicted]
        pairs = list(zip(in_gold, in_predicted, strict=True))
        f1s.append(_f1_percent(pairs.count((True, True)), pairs.count((False, True)), pairs.count((True, False))))
    exact = sum(1 for expected, got in zip(gold, predicted, strict=True) if set(expected) == set(got))
    return ClassificationScore(100.0 * exact / len(gold), sum(f1s) / len(f1s), len(gold))


def entity_scores(gold: Sequence[Iterable[Span]], predicted: Sequence[Iterable[Span]]) -> EntityScore:
    """seqeval's micro-averaged scores: an entity counts only where (start, end, type) all match within its example.
    With no predictions precision is 0, with no gold entities recall is 0 (seqeval's zero_division=0)."""
    _check_pairs(gold, predicted)
    hits = gold_count = predicted_count = 0
    for expected, got in zip(gold, predicted, strict=True):
        expected_set, got_set = set(expected), set(got)
        hits += len(expected_set & got_set)
        gold_count += len(expected_set)
        predicted_count += len(got_set)
    precision = 100.0 * hits / predicted_count if predicted_count else 0.0
    recall = 100.0 * hits / gold_count if gold_count else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return EntityScore(precision, recall, f1, gold_count, predicted_count, len(gold))


def _unit_rows(vectors: np.ndarray, name: str) -> np.ndarray:
    """Rows scaled to length 1 in float64; a zero row stays zero (its cosine with anything is 0, never NaN)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be a [n, d] matrix, not shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def mean_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean row-wise cosine similarity of two [n, d] matrices (e.g. FP32 and INT8 embeddings of the same texts)."""
    left, right = _unit_rows(a, "a"), _unit_rows(b, "b")
    if left.shape != right.shape:
        raise ValueError(f"shapes differ: {left.shape} and {right.shape}")
    if not len(left):
        raise ValueError("no vectors to compare")
    return float(np.mean(np.sum(left * right, axis=1)))


def recall_at_k(queries: np.ndarray, passages: np.ndarray, relevant: Sequence[frozenset[int]], k: int = 10) -> float:
    """Percent of queries with a relevant passage among their k most cosine-similar passages; equal similarities
    rank by passage index (a stable sort), so the score does not depend on the sort's implementation."""
    query_rows, passage_rows = _unit_rows(queries, "queries"), _unit_rows(passages, "passages")
    if len(query_rows) != len(relevant):
        raise ValueError(f"{len(query_rows)} queries but {len(relevant)} relevance sets")
    if not len(query_rows) or not len(passage_rows):
        raise ValueError("recall@k needs at least one query and one passage")
    if query_rows.shape[1] != passage_rows.shape[1]:
        raise ValueError(f"query and passage widths differ: {query_rows.shape[1]} and {passage_rows.shape[1]}")
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    for index, indices in enumerate(relevant):
        if not indices or not all(0 <= i < len(passage_rows) for i in indices):
            raise ValueError(f"query {index} needs relevant passage indices in 0..{len(passage_rows) - 1}")
    hits = 0
    for first in range(0, len(query_rows), _QUERY_CHUNK):
        similarities = query_rows[first : first + _QUERY_CHUNK] @ passage_rows.T
        top = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
        hits += sum(1 for offset, row in enumerate(top) if relevant[first + offset].intersection(row.tolist()))
    return 100.0 * hits / len(query_rows)
