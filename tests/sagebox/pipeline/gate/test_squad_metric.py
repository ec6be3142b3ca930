from __future__ import annotations

import pytest

from sagebox.pipeline.data.squad import GoldAnswer, QAExample
from sagebox.pipeline.gate.squad_metric import best_over_golds, exact_match, f1, normalize_answer, score


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Cat!", "cat"),
        ("  a  b\tc ", "b c"),
        ("An apple, the pear.", "apple pear"),
        ("theatre", "theatre"),  # articles only as whole words
        ("U.S.A.", "usa"),  # punctuation is dropped, not turned into spaces
        ("Denver-Broncos", "denverbroncos"),
        ("l’amour", "l’amour"),  # only ASCII punctuation goes
        ("THE", ""),
    ],
)
def test_normalize_answer(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


def test_f1_hand_computed() -> None:
    # pred tokens [cat, sat, on, mat], gold [cat, on, mat]: 3 shared, P=3/4, R=1, F1=6/7
    assert f1("the cat sat on the mat", "cat on mat") == pytest.approx(6 / 7)
    # P=1/2, R=1 -> 2/3
    assert f1("Denver Broncos", "Broncos") == pytest.approx(2 / 3)
    # repeated tokens count with multiplicity: shared x1 y1 -> P=R=2/3
    assert f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert f1("Paris", "London") == 0.0
    assert f1("", "London") == 0.0


def test_empty_after_normalisation_is_exact_but_not_f1() -> None:
    # SQuAD v1.1: EM compares normalised strings ("" == ""), F1 has no shared tokens -> 0.
    assert exact_match("the", "a") == 1.0
    assert f1("the", "a") == 0.0


def test_exact_match_ignores_case_articles_punctuation() -> None:
    assert exact_match("The Broncos.", "broncos") == 1.0
    assert exact_match("Broncos of Denver", "Denver Broncos") == 0.0


def test_best_over_golds_takes_each_maximum_separately() -> None:
    em, f = best_over_golds("Denver Broncos", ["Broncos", "the Denver Broncos team"])
    assert em == 0.0
    # second gold: [denver, broncos, team] -> P=1, R=2/3 -> F1=0.8 beats 2/3
    assert f == pytest.approx(0.8)
    with pytest.raises(ValueError):
        best_over_golds("x", [])


def _ex(qid: str, *golds: str) -> QAExample:
    return QAExample(qid, "q?", "context", tuple(GoldAnswer(g, 0) for g in golds))


def test_corpus_score_hand_computed_and_unanswered_count_zero() -> None:
    examples = [_ex("1", "Denver Broncos"), _ex("2", "cat on mat"), _ex("3", "1999", "in 1999")]
    predictions = {"1": "denver broncos", "2": "the cat sat on the mat"}  # "3" unanswered
    result = score(examples, predictions)
    assert result.total == 3
    assert result.unanswered == 1
    assert result.exact_match == pytest.approx(100 * (1 + 0 + 0) / 3)
    assert result.f1 == pytest.approx(100 * (1 + 6 / 7 + 0) / 3)
