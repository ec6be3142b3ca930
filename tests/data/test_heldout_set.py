"""Checks on the hand-written held-out QA set: SQuAD v1.1 shape, sizes, exact answer spans, and no text shared
with the synthetic generator the demo model is trained on (sagebox/demo/synth_squad.py, with its relations and
word lists in synth_relations.py and synth_values.py) or with the hand-written tuning set (tests/data/tuning)."""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sagebox.demo import qa_corpus, synth_clauses
from sagebox.demo.synth_squad import _FILLERS, RELATIONS, generate
from sagebox.pipeline.data.squad import load_squad

HELDOUT = Path(__file__).resolve().parent / "heldout" / "heldout_qa.json"
TUNING = Path(__file__).resolve().parent / "tuning" / "tuning_qa.json"  # recipes are chosen on it: kept apart
TUNING2 = Path(__file__).resolve().parent / "tuning2" / "tuning2_qa.json"  # the record-like tuning set, likewise

MIN_PARAGRAPHS = 24
MIN_QUESTIONS = 120
CONTEXT_WORDS = (60, 220)
QUESTIONS_PER_PARAGRAPH = (4, 7)
SHINGLE = 8  # words: a shared run this long means a shared sentence
TEMPLATE_RUN = 5  # words of a generator template's fixed text that must not appear in a held-out context
# Generator sample for the overlap check: fixed seeds, both splits (dev adds wordings train never uses).
GENERATOR_SAMPLE = (("train", 6000), ("dev", 3000))
GENERATOR_SEED = 20240517


@cache
def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(HELDOUT.read_text(encoding="utf-8"))
    return loaded


def paragraphs() -> list[dict[str, Any]]:
    return [p for article in document()["data"] for p in article["paragraphs"]]


def questions() -> list[tuple[str, dict[str, Any]]]:
    """(context, qa) for every question."""
    return [(p["context"], qa) for p in paragraphs() for qa in p["qas"]]


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(text: str, n: int = SHINGLE) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def shared_runs(texts: Iterable[str], against: set[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return sorted({run for text in texts for run in shingles(text) if run in against})


@cache
def generator_shingles() -> frozenset[tuple[str, ...]]:
    contexts = {ex.context for split, n in GENERATOR_SAMPLE for ex in generate(n, GENERATOR_SEED, split)}
    assert len(contexts) >= 2000, f"only {len(contexts)} generated contexts: the overlap check would be weak"
    # The generic clauses (synth_clauses.py) too: their words vary more, so fewer runs repeat.
    contexts |= {ex.context for split, n in GENERATOR_SAMPLE for ex in synth_clauses.generate(n, GENERATOR_SEED, split)}
    return frozenset(run for context in contexts for run in shingles(context))


def template_literals(template: str) -> Iterator[str]:
    """The fixed text between a template's {slots}."""
    for literal, _, _, _ in string.Formatter().parse(template):
        if literal.strip():
            yield literal


def template_regex(template: str) -> re.Pattern[str]:
    parsed = string.Formatter().parse(template)
    parts = [re.escape(literal) + ("" if slot is None else ".+") for literal, slot, _, _ in parsed]
    return re.compile("".join(parts), re.IGNORECASE)


def test_structure_is_squad_v1_1() -> None:
    doc = document()
    assert doc["version"] == "1.1"
    assert isinstance(doc["data"], list) and doc["data"]
    for article in doc["data"]:
        assert isinstance(article["title"], str) and article["title"].strip()
        assert isinstance(article["paragraphs"], list) and article["paragraphs"]
        for paragraph in article["paragraphs"]:
            assert isinstance(paragraph["context"], str)
            for qa in paragraph["qas"]:
                assert set(qa) == {"id", "question", "answers"}, qa
                assert isinstance(qa["id"], str) and qa["id"]
                assert isinstance(qa["question"], str) and qa["question"].rstrip().endswith("?"), qa["id"]
                assert isinstance(qa["answers"], list) and qa["answers"], qa["id"]
                for answer in qa["answers"]:
                    assert set(answer) == {"text", "answer_start"}, qa["id"]
                    assert isinstance(answer["text"], str) and answer["text"].strip() == answer["text"] != ""
                    assert isinstance(answer["answer_start"], int) and not isinstance(answer["answer_start"], bool)


def test_sizes() -> None:
    assert len(paragraphs()) >= MIN_PARAGRAPHS
    assert len(questions()) >= MIN_QUESTIONS
    for paragraph in paragraphs():
        n_words = len(paragraph["context"].split())
        assert CONTEXT_WORDS[0] <= n_words <= CONTEXT_WORDS[1], (n_words, paragraph["context"][:60])
        assert QUESTIONS_PER_PARAGRAPH[0] <= len(paragraph["qas"]) <= QUESTIONS_PER_PARAGRAPH[1]
    contexts = [p["context"] for p in paragraphs()]
    assert len(set(contexts)) == len(contexts), "a paragraph is repeated"


def test_ids_and_questions_are_unique() -> None:
    ids = [qa["id"] for _, qa in questions()]
    assert len(set(ids)) == len(ids), sorted(i for i in ids if ids.count(i) > 1)
    asked = [(context, qa["question"]) for context, qa in questions()]
    assert len(set(asked)) == len(asked), "a question is asked twice about the same paragraph"


def test_every_answer_is_the_text_at_its_start() -> None:
    for context, qa in questions():
        for answer in qa["answers"]:
            start, text = answer["answer_start"], answer["text"]
            assert 0 <= start <= len(context) - len(text), (qa["id"], text)
            assert context[start : start + len(text)] == text, (qa["id"], text, context[start : start + len(text)])


def test_answers_start_and_end_on_word_boundaries() -> None:
    for context, qa in questions():
        for answer in qa["answers"]:
            start, end = answer["answer_start"], answer["answer_start"] + len(answer["text"])
            before = context[start - 1] if start > 0 else " "
            after = context[end] if end < len(context) else " "
            assert not before.isalnum(), (qa["id"], answer["text"], "starts inside a word")
            assert not after.isalnum(), (qa["id"], answer["text"], "ends inside a word")


def test_alternative_answers_mark_the_same_place() -> None:
    """Several gold answers are alternative cuts of one span (SQuAD style), never a second place in the text."""
    for _, qa in questions():
        first = qa["answers"][0]
        lo, hi = first["answer_start"], first["answer_start"] + len(first["text"])
        for other in qa["answers"][1:]:
            o_lo, o_hi = other["answer_start"], other["answer_start"] + len(other["text"])
            assert o_lo < hi and lo < o_hi, (qa["id"], first["text"], other["text"])
        texts = [a["text"] for a in qa["answers"]]
        assert len(set(texts)) == len(texts), (qa["id"], "repeats an answer")


def test_answers_are_short_spans() -> None:
    lengths = [len(qa["answers"][0]["text"].split()) for _, qa in questions()]
    assert max(lengths) <= 16, max(lengths)
    short = sum(1 for n in lengths if n <= 8)
    assert short >= 0.9 * len(lengths), f"only {short} of {len(lengths)} first answers have 8 words or fewer"


def test_project_loader_reads_it_with_span_checks() -> None:
    """What `sagebox` evaluation reads: the project's own SQuAD loader accepts the file and sees every question."""
    examples = load_squad(HELDOUT, check_spans=True)
    assert [ex.id for ex in examples] == [qa["id"] for _, qa in questions()]
    assert all(ex.answers for ex in examples)


def test_overlap_check_detects_a_shared_sentence() -> None:
    """The generator check below could fail: a generated context pasted into a paragraph is caught."""
    generated = generate(1, GENERATOR_SEED, "train")[0].context
    assert shared_runs([f"An unrelated opening sentence here. {generated} And a close."], set(generator_shingles()))


def test_no_held_out_context_shares_eight_words_with_generated_contexts() -> None:
    contexts = [p["context"] for p in paragraphs()]
    assert shared_runs(contexts, set(generator_shingles())) == []


def test_no_generator_template_text_or_filler_in_contexts() -> None:
    runs: set[tuple[str, ...]] = set()
    for relation in RELATIONS:
        for template in relation.sentences:
            for literal in template_literals(template):
                runs |= shingles(literal, TEMPLATE_RUN)
    runs |= {run for filler in _FILLERS for run in shingles(filler, TEMPLATE_RUN)}
    assert runs, "the generator has no template text to compare with"
    for paragraph in paragraphs():
        found = shingles(paragraph["context"], TEMPLATE_RUN) & runs
        assert not found, (paragraph["context"][:60], sorted(found))
        lowered = paragraph["context"].lower()
        assert not [f for f in _FILLERS if f.lower() in lowered]


def test_no_question_uses_a_generator_wording() -> None:
    patterns = [
        template_regex(template)
        for relation in RELATIONS
        for template, _ in relation.questions + relation.dev_questions
    ]
    # Control: every question the generator asks matches one of these patterns, so a reused wording would be caught.
    for ex in generate(300, GENERATOR_SEED, "dev"):
        assert any(p.fullmatch(ex.question) for p in patterns), ex.question
    for _, qa in questions():
        matched = [p.pattern for p in patterns if p.fullmatch(qa["question"])]
        assert not matched, (qa["id"], qa["question"], matched)


@pytest.mark.parametrize("tuning_set", [TUNING, TUNING2], ids=["tuning", "tuning2"])
def test_shares_no_sentence_or_question_with_the_tuning_set(tuning_set: Path) -> None:
    """Decisions about the demo model are made on the tuning sets, so none of their text may reach this set."""
    tuning = load_squad(tuning_set)
    runs = {run for context in {ex.context for ex in tuning} for run in shingles(context)}
    assert len(runs) > 1000 if tuning_set == TUNING else len(runs) > 500, "the tuning set did not load"
    assert shared_runs([p["context"] for p in paragraphs()], runs) == []
    assert not {qa["question"] for _, qa in questions()} & {ex.question for ex in tuning}


def test_reference_sample_topic_is_not_used() -> None:
    """The Amazon rainforest is the reference workflow's sample (sagebox/demo_data.py), kept out of this set."""
    for paragraph in paragraphs():
        assert "amazon" not in paragraph["context"].lower()


def test_no_question_is_one_the_clause_generator_asks() -> None:
    """synth_clauses.py builds its questions from parts, not templates: compare with a large sample of them."""
    asked = {ex.question for split, n in GENERATOR_SAMPLE for ex in synth_clauses.generate(n, GENERATOR_SEED, split)}
    assert len(asked) > 1000
    assert [qa["question"] for _, qa in questions() if qa["question"] in asked] == []


def test_shares_no_sentence_or_question_with_the_training_corpus() -> None:
    """The hand-written training corpus (sagebox/demo/corpus) is what the demo model learns most from: no
    8-word run of its contexts and none of its questions may be in this set, nor in the tuning set."""
    articles = qa_corpus.load()
    runs = {run for article in articles for run in shingles(article.context)}
    assert len(runs) > 50_000, "the corpus did not load: the check would be empty"
    asked = {ex.question.lower() for article in articles for ex in article.examples}
    assert shared_runs([p["context"] for p in paragraphs()], runs) == []
    assert not {qa["question"].lower() for _, qa in questions()} & asked
    tuning = load_squad(TUNING)
    assert shared_runs({ex.context for ex in tuning}, runs) == []
    assert not {ex.question.lower() for ex in tuning} & asked
