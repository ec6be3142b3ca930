"""The hand-written training corpus: the checker refuses what would teach the model wrong spans, and the committed
corpus passes it, keeps out of the evaluation sets and the reference sample, and splits the same way every time."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sagebox.demo import qa_corpus
from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS
from sagebox.errors import SageboxError

CONTEXT = (
    "This oak door was carved in 1912 by Ilse Marr for the chapel at Harwick. Marr, who trained in Lübeck, took "
    "eleven months over it and was paid 40 guineas. The panels show the four seasons; winter was re-carved in "
    "1938 after a fire, and the door came to the museum in 1961, 49 years after Marr carved it."
)


def write(tmp_path: Path, qas: list[dict[str, Any]], context: str = CONTEXT, **fields: str) -> Path:
    article = {"id": "t-001", "genre": "museum label", "title": "The Harwick Door", "context": context, "qas": qas}
    article.update(fields)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"batch": "t", "articles": [article]}), encoding="utf-8")
    return path


GOOD: list[dict[str, Any]] = [
    {"q": "Who made the door?", "a": ["Ilse Marr"]},
    {"q": "How long did the work take?", "a": ["eleven months"]},
    {"q": "Where did the carver learn her trade?", "a": ["Lübeck", "in Lübeck"]},
    {"q": "Which name is given twice, the second time alone?", "a": [{"text": "Marr", "nth": 2}]},
]


def test_offsets_are_computed_from_the_text(tmp_path: Path) -> None:
    (article,) = qa_corpus.load([write(tmp_path, GOOD)])
    assert [ex.id for ex in article.examples] == ["t-001-1", "t-001-2", "t-001-3", "t-001-4"]
    for ex in article.examples:
        for answer in ex.answers:
            assert ex.context[answer.start : answer.start + len(answer.text)] == answer.text
    # nth counts whole-word occurrences: "Marr" in "Ilse Marr" is the first, "Marr, who" the second.
    second = article.examples[3].answers[0]
    assert CONTEXT[second.start :].startswith("Marr, who")
    assert article.examples[2].answers[1].start == CONTEXT.index("in Lübeck")


@pytest.mark.parametrize(
    ("qas", "message"),
    [
        ([*GOOD[:3], {"q": "Who?", "a": ["Marr"]}], "occurs 3 times: say which with 'nth'"),
        ([*GOOD[:3], {"q": "Who?", "a": [{"text": "Marr", "nth": 4}]}], "occurs 3 times, not 4"),
        ([*GOOD[:3], {"q": "What wood?", "a": ["Oak"]}], "not in the context on word boundaries"),
        ([*GOOD[:3], {"q": "What part of a word?", "a": ["arve"]}], "occurs only inside other words"),
        ([*GOOD[:3], {"q": "When?", "a": ["1912", "1938"]}], "do not overlap"),
        ([*GOOD[:3], {"q": "Who made it", "a": ["Ilse Marr"]}], "ends with '?'"),
        ([*GOOD[:3], {"q": "Who made the door?", "a": ["Marr"]}], "asked twice"),
        ([*GOOD[:3], {"q": "What?", "a": [" Ilse Marr"]}], "surrounding spaces"),
        ([*GOOD[:3], {"q": "What?", "a": []}], "no answers"),
        ([*GOOD[:3], {"q": "What?", "a": [{"text": "1912", "nth": 0}]}], "positive integer"),
        (GOOD[:2], "must list 3-12 questions"),
    ],
)
def test_the_checker_refuses_bad_answers(tmp_path: Path, qas: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SageboxError, match=re.escape(message)):
        qa_corpus.load([write(tmp_path, qas)])


def test_the_reference_sample_topic_is_refused(tmp_path: Path) -> None:
    context = CONTEXT.replace("the chapel at Harwick", "a chapel near the Amazon")
    with pytest.raises(SageboxError, match="kept out of the corpus"):
        qa_corpus.load([write(tmp_path, GOOD, context)])
    with pytest.raises(SageboxError, match="kept out of the corpus"):
        qa_corpus.load([write(tmp_path, GOOD, title="Doors of the rainforest")])


def test_a_malformed_file_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"articles": [', encoding="utf-8")
    with pytest.raises(SageboxError, match=r"bad\.json"):
        qa_corpus.load([path])


def test_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert qa_corpus.main(["check", str(write(tmp_path, GOOD))]) == 0
    assert "ok: 1 articles, 4 questions" in capsys.readouterr().out
    assert qa_corpus.main(["check", str(write(tmp_path, [*GOOD[:3], {"q": "When?", "a": ["1066"]}]))]) == 1
    assert "1066" in capsys.readouterr().err


# The committed corpus.


def corpus() -> list[qa_corpus.Article]:
    return qa_corpus.load()


def test_the_committed_corpus_passes_the_checker() -> None:
    articles = corpus()
    assert len(articles) >= 600
    assert sum(len(a.examples) for a in articles) >= 4800
    assert len({a.genre for a in articles}) >= 300


def test_no_text_of_the_reference_sample() -> None:
    """The rainforest paragraph that scripts/invoke-INT8.py asks about must not be learned: no 6-word run of it in
    any context, and none of its questions."""

    def runs(text: str, n: int = 6) -> set[tuple[str, ...]]:
        words = re.findall(r"[a-z0-9]+", text.lower())
        return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}

    sample = runs(RAINFOREST_CONTEXT)
    asked = {q.lower() for q in RAINFOREST_QUESTIONS}
    for article in corpus():
        assert not runs(article.context) & sample, article.id
        assert not {ex.question.lower() for ex in article.examples} & asked, article.id


def test_the_split_is_stable_and_disjoint() -> None:
    articles = corpus()
    train, dev = qa_corpus.split(articles)
    again_train, again_dev = qa_corpus.split(list(reversed(articles)))
    assert [a.id for a in train] == [a.id for a in again_train]
    assert [a.id for a in dev] == [a.id for a in again_dev]
    assert not {a.id for a in train} & {a.id for a in dev}
    assert len(dev) == len(articles) // 10
