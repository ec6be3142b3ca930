"""The official SQuAD v1.1 metric: answer normalisation, token F1, exact match, max over gold answers."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sagebox.pipeline.data.squad import QAExample

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace (in that order)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision = shared / len(predicted)
    recall = shared / len(expected)
    return 2 * precision * recall / (precision + recall)


def best_over_golds(prediction: str, golds: Sequence[str]) -> tuple[float, float]:
    """(EM, F1) of one prediction: each is the maximum over the gold answers."""
    if not golds:
        raise ValueError("a question needs at least one gold answer to be scored")
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


@dataclass(frozen=True)
class SquadScore:
    exact_match: float  # percent
    f1: float  # percent
    total: int
    unanswered: int

    def to_dict(self) -> dict[str, float | int]:
        return {
            "exact_match": self.exact_match,
            "f1": self.f1,
            "total": self.total,
            "unanswered": self.unanswered,
        }


def score(examples: Sequence[QAExample], predictions: Mapping[str, str]) -> SquadScore:
    """Corpus EM/F1 in percent; a question with no prediction scores 0 (as the official script does)."""
    if not examples:
        raise ValueError("no questions to score")
    em_sum = f1_sum = 0.0
    unanswered = 0
    for example in examples:
        if example.id not in predictions:
            unanswered += 1
            continue
        em, f = best_over_golds(predictions[example.id], [a.text for a in example.answers])
        em_sum += em
        f1_sum += f
    total = len(examples)
    return SquadScore(100.0 * em_sum / total, 100.0 * f1_sum / total, total, unanswered)
