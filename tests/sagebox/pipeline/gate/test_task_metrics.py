"""Task metrics against hand-computed values (and scikit-learn's where it is installed), with their edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from sagebox.pipeline.data.spans import bio_spans
from sagebox.pipeline.gate.task_metrics import (
    ClassificationScore,
    EntityScore,
    classification_scores,
    entity_scores,
    mean_cosine,
    multilabel_scores,
    recall_at_k,
)

TOPICS = ("sports", "politics", "science", "health")


def test_classification_accuracy_and_macro_f1_by_hand() -> None:
    # a: tp 1, fn 1 -> F1 2/3; b: tp 1, fp 2 -> 2/4; c: fn 1 -> 0. Macro (2/3 + 1/2 + 0) / 3.
    score = classification_scores(["a", "a", "b", "c"], ["a", "b", "b", "b"])
    assert score.accuracy == pytest.approx(50.0)
    assert score.macro_f1 == pytest.approx(100 * (2 / 3 + 1 / 2) / 3)
    assert score.total == 4


def test_a_label_only_predicted_counts_as_zero_and_absent_labels_do_not_count() -> None:
    # x: tp 1, fn 1 -> 2/3; y (predicted, never gold) -> 0; "z" appears nowhere and is not averaged in.
    assert classification_scores(["x", "x"], ["x", "y"]).macro_f1 == pytest.approx(100 / 3)
    assert classification_scores(["x", "y"], ["x", "y"]) == ClassificationScore(100.0, 100.0, 2)
    assert classification_scores(["x"], ["y"]) == ClassificationScore(0.0, 0.0, 1)


def test_classification_matches_scikit_learn() -> None:
    """scikit-learn 1.9.1's f1_score(average="macro", labels=<union>, zero_division=0) gives 50.0794 here ("f" is
    only predicted); importing it costs ~5 s, so its answer is written down."""
    gold = list("aabbbccddeabcdeabcde")
    predicted = list("abbbcccdefaacdeebbdd")
    score = classification_scores(gold, predicted)
    assert score.macro_f1 == pytest.approx(50.079365079365076)
    assert score.accuracy == pytest.approx(60.0)


def test_classification_refuses_mismatched_or_empty_input() -> None:
    with pytest.raises(ValueError, match="2 gold examples but 1 predictions"):
        classification_scores(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no examples"):
        classification_scores([], [])


def test_multilabel_by_hand() -> None:
    gold = [frozenset({"sports"}), frozenset({"politics", "science"}), frozenset()]
    predicted = [frozenset({"sports"}), frozenset({"politics"}), frozenset({"health"})]
    # sports 1, politics 1, science (missed) 0, health (false alarm) 0; one exact set of three.
    score = multilabel_scores(gold, predicted, TOPICS)
    assert score.accuracy == pytest.approx(100 / 3)
    assert score.macro_f1 == pytest.approx(50.0)
    # A label of the model that neither side ever holds scores 0 (zero_division=0) and still counts.
    assert multilabel_scores(gold, predicted, (*TOPICS, "weather")).macro_f1 == pytest.approx(40.0)
    assert multilabel_scores([frozenset()], [frozenset()], TOPICS) == ClassificationScore(100.0, 0.0, 1)


def test_multilabel_matches_scikit_learn() -> None:
    """scikit-learn's macro f1_score and subset accuracy on the label-indicator matrices: 75.0 and 50.0."""
    gold = [{"sports"}, {"sports", "health"}, set(), {"science"}, {"politics", "science"}, {"health"}]
    predicted = [{"sports"}, {"sports"}, {"health"}, {"science"}, {"politics", "science"}, set()]
    score = multilabel_scores([frozenset(g) for g in gold], [frozenset(p) for p in predicted], TOPICS)
    assert (score.macro_f1, score.accuracy) == (pytest.approx(75.0), pytest.approx(50.0))


def test_multilabel_refuses_labels_outside_the_set() -> None:
    with pytest.raises(ValueError, match="'weather'"):
        multilabel_scores([frozenset({"weather"})], [frozenset()], TOPICS)
    with pytest.raises(ValueError, match="label set"):
        multilabel_scores([frozenset()], [frozenset()], ())


def test_entity_scores_micro_average_exact_matches_by_example() -> None:
    gold = [[(0, 5, "PER"), (10, 15, "LOC")], [(0, 3, "ORG")]]
    predicted = [[(0, 5, "PER"), (10, 15, "ORG")], []]  # right span, wrong type: no credit
    score = entity_scores(gold, predicted)
    assert (score.gold_entities, score.predicted_entities, score.total) == (3, 2, 2)
    assert (score.precision, score.recall) == (pytest.approx(50.0), pytest.approx(100 / 3))
    assert score.f1 == pytest.approx(40.0)
    # The same span in another example is not a match.
    assert entity_scores([[(0, 5, "PER")], []], [[], [(0, 5, "PER")]]).f1 == 0.0
    assert entity_scores([[], []], [[], []]) == EntityScore(0.0, 0.0, 0.0, 0, 0, 2)
    assert entity_scores([[(1, 4, "PER")]], [[(1, 4, "PER"), (1, 4, "PER")]]).precision == 100.0  # sets


def test_entity_scores_match_seqevals_documented_example() -> None:
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    predicted = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    score = entity_scores([bio_spans(tags) for tags in gold], [bio_spans(tags) for tags in predicted])
    assert (score.precision, score.recall, score.f1) == (50.0, 50.0, 50.0)  # seqeval: 0.50 each


@pytest.mark.parametrize(
    ("tags", "spans"),
    [
        (["B-PER", "I-PER", "O", "B-LOC"], [(0, 2, "PER"), (3, 4, "LOC")]),  # seqeval's docstring example
        (["I-PER", "I-PER", "O"], [(0, 2, "PER")]),  # I- after the start opens a chunk
        (["O", "I-PER", "O", "I-PER"], [(1, 2, "PER"), (3, 4, "PER")]),
        (["B-PER", "B-PER"], [(0, 1, "PER"), (1, 2, "PER")]),
        (["B-PER", "I-LOC", "I-LOC"], [(0, 1, "PER"), (1, 3, "LOC")]),  # another type starts a chunk
        (["I-ORG", "B-ORG", "I-ORG"], [(0, 1, "ORG"), (1, 3, "ORG")]),
        (["B-PER", "I-PER", "I-ORG", "O"], [(0, 2, "PER"), (2, 3, "ORG")]),
        (["PER", "PER", "O", "LOC"], [(0, 2, "PER"), (3, 4, "LOC")]),  # bare labels read as I-
        (["B-PER", "PER"], [(0, 2, "PER")]),
        (["S-PER", "B-LOC", "E-LOC", "E-LOC"], [(0, 1, "PER"), (1, 3, "LOC"), (3, 4, "LOC")]),  # IOBES
        (["B", "I", "O"], [(0, 2, "_")]),  # a prefix without a type: seqeval's "_"
        (["B-MISC-X", "I-MISC-X"], [(0, 2, "MISC-X")]),
        (["O", "O"], []),
        ([], []),
    ],
)
def test_bio_spans_chunk_as_seqeval(tags: list[str], spans: list[tuple[int, int, str]]) -> None:
    assert bio_spans(tags) == spans


def test_mean_cosine_by_hand_and_with_zero_vectors() -> None:
    a = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])
    b = np.array([[3.0, 0.0], [0.0, -1.0], [1.0, 1.0]])
    assert mean_cosine(a, b) == pytest.approx(0.0)  # (1 - 1 + 0) / 3
    assert mean_cosine(np.array([[3.0, 4.0]]), np.array([[4.0, 3.0]])) == pytest.approx(0.96)
    assert mean_cosine(np.zeros((2, 3)), np.zeros((2, 3))) == 0.0
    with pytest.raises(ValueError, match="shapes differ"):
        mean_cosine(np.ones((2, 3)), np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"\[n, d\]"):
        mean_cosine(np.ones(3), np.ones(3))


def test_recall_at_k_by_hand_with_ties_by_index_and_zero_vectors() -> None:
    passages = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    queries = np.array([[1.0, 0.0], [0.0, 0.0]])
    relevant = [frozenset({1}), frozenset({3})]
    # q0 ranks p0 (1.0), p2 (0.71), then p1 and p3 tied at 0 by index; q1 (zero) ties everything: p0, p1, p2, p3.
    assert [recall_at_k(queries, passages, relevant, k) for k in (1, 2, 3, 4, 10)] == [0.0, 0.0, 50.0, 100.0, 100.0]
    tied = np.array([[0.0, 1.0], [2.0, 0.0], [1.0, 0.0]])  # p1 and p2 are equally close to the query
    assert recall_at_k(np.array([[1.0, 0.0]]), tied, [frozenset({1})], k=1) == 100.0
    assert recall_at_k(np.array([[1.0, 0.0]]), tied, [frozenset({2})], k=1) == 0.0
    assert recall_at_k(np.array([[1.0, 0.0]]), tied, [frozenset({0, 2})], k=2) == 100.0


def test_recall_at_k_scores_many_queries_in_chunks() -> None:
    rng = np.random.default_rng(0)
    passages = rng.normal(size=(50, 8))
    queries = passages[rng.integers(0, 50, size=2500)] + rng.normal(scale=1e-3, size=(2500, 8))
    nearest = [frozenset({int(np.argmax(passages @ q / np.linalg.norm(passages, axis=1)))}) for q in queries]
    assert recall_at_k(queries, passages, nearest, k=1) == 100.0


def test_recall_at_k_refuses_bad_input() -> None:
    one = np.ones((1, 2))
    with pytest.raises(ValueError, match="1 queries but 2 relevance sets"):
        recall_at_k(one, one, [frozenset({0}), frozenset({0})])
    with pytest.raises(ValueError, match="k must be at least 1"):
        recall_at_k(one, one, [frozenset({0})], k=0)
    with pytest.raises(ValueError, match=r"0\.\.0"):
        recall_at_k(one, one, [frozenset({1})])
    with pytest.raises(ValueError, match=r"0\.\.0"):
        recall_at_k(one, one, [frozenset()])
    with pytest.raises(ValueError, match="widths differ"):
        recall_at_k(one, np.ones((1, 3)), [frozenset({0})])


def test_to_dict_rounds_to_four_decimals() -> None:
    assert ClassificationScore(100 / 3, 38.888888, 4).to_dict() == {
        "accuracy": 33.3333,
        "macro_f1": 38.8889,
        "total": 4,
    }
    assert EntityScore(50.0, 100 / 3, 40.0, 3, 2, 2).to_dict() == {
        "precision": 50.0,
        "recall": 33.3333,
        "f1": 40.0,
        "gold_entities": 3,
        "predicted_entities": 2,
        "total": 2,
    }
