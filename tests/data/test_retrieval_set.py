"""Checks on the hand-written query/passage retrieval set (tests/data/retrieval): the JSON Lines shape that
`sagebox.pipeline.data.task_data.load_retrieval` reads, the counts, one relevant passage per query, no repeated text, no
query copied into a passage, and the length bounds the set was written to. No model is loaded."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from sagebox.pipeline.data.task_data import RetrievalData, load_retrieval

RETRIEVAL = Path(__file__).resolve().parent / "retrieval" / "retrieval.jsonl"

QUERIES = 120
DISTRACTORS = 120
PASSAGES = QUERIES + DISTRACTORS  # one positive per query, plus the distractors
QUERY_WORDS = (3, 15)
PASSAGE_WORDS = (20, 70)
PASSAGE_SENTENCES = (1, 3)
# A sentence ends at . ! or ? followed by a space and a capital or digit (so "3.14" and "f/1.8" do not split).
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


@cache
def records() -> tuple[dict[str, Any], ...]:
    lines = RETRIEVAL.read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


@cache
def data() -> RetrievalData:
    return load_retrieval(RETRIEVAL)


def query_records() -> list[dict[str, Any]]:
    return [record for record in records() if "query" in record]


def distractor_records() -> list[dict[str, Any]]:
    return [record for record in records() if "query" not in record]


def words(text: str) -> list[str]:
    return text.split()


def test_every_line_is_a_query_with_its_positive_or_a_distractor() -> None:
    assert records(), "the file is empty"
    for record in records():
        assert set(record) in ({"query", "positive"}, {"passage"}), record
        for value in record.values():
            assert isinstance(value, str) and value.strip() == value != "", record
            assert "\n" not in value and "  " not in value, value


def test_counts() -> None:
    assert len(query_records()) == QUERIES
    assert len(distractor_records()) == DISTRACTORS
    assert len(records()) == QUERIES + DISTRACTORS


def test_project_loader_reads_it() -> None:
    """What the embedding gate and the bench read: every query, every passage, in the file's order."""
    loaded = data()
    assert len(loaded.queries) == QUERIES
    assert len(loaded.passages) == PASSAGES
    assert len(loaded.relevant) == QUERIES
    assert list(loaded.queries) == [record["query"] for record in query_records()]
    expected = [record["positive"] for record in query_records()] + [r["passage"] for r in distractor_records()]
    assert list(loaded.passages) == expected


def test_every_query_has_exactly_one_relevant_passage_of_its_own() -> None:
    loaded = data()
    for query, relevant, record in zip(loaded.queries, loaded.relevant, query_records(), strict=True):
        assert len(relevant) == 1, query
        (index,) = relevant
        assert loaded.passages[index] == record["positive"], query
    positives = [index for relevant in loaded.relevant for index in relevant]
    assert len(set(positives)) == QUERIES, "two queries share a positive passage"
    distractors = {r["passage"] for r in distractor_records()}
    assert not distractors & {record["positive"] for record in query_records()}, "a distractor is also a positive"


def test_no_text_is_repeated() -> None:
    queries = [record["query"] for record in query_records()]
    passages = [record["positive"] for record in query_records()] + [r["passage"] for r in distractor_records()]
    for texts in (queries, passages):
        folded = [" ".join(text.lower().split()) for text in texts]
        assert len(set(folded)) == len(folded), sorted(t for t in folded if folded.count(t) > 1)
    assert not {q.lower() for q in queries} & {p.lower() for p in passages}


def test_no_query_appears_verbatim_in_a_passage() -> None:
    loaded = data()
    passages = [passage.lower() for passage in loaded.passages]
    copied = [query for query in loaded.queries if any(query.lower() in passage for passage in passages)]
    assert copied == []


def test_query_lengths() -> None:
    for query in data().queries:
        assert QUERY_WORDS[0] <= len(words(query)) <= QUERY_WORDS[1], query


def test_passage_lengths() -> None:
    for passage in data().passages:
        assert PASSAGE_WORDS[0] <= len(words(passage)) <= PASSAGE_WORDS[1], passage
        sentences = SENTENCE_BREAK.split(passage)
        assert PASSAGE_SENTENCES[0] <= len(sentences) <= PASSAGE_SENTENCES[1], passage
        assert passage[-1] in ".!?", passage


def test_sentence_count_check_can_fail() -> None:
    """The sentence splitter above finds four sentences in four sentences, so a long passage would be caught."""
    assert len(SENTENCE_BREAK.split("One here. Two at 3.14 m. Three? Four!")) == 4
