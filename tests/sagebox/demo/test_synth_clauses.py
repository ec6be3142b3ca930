from __future__ import annotations

import re
from collections import Counter
from functools import cache

from sagebox.demo.synth_clauses import _plural, _verb, generate
from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS
from sagebox.pipeline.data.squad import QAExample


@cache
def _sample(n: int, split: str = "train") -> tuple[QAExample, ...]:
    return tuple(generate(n, 0, split))


def test_deterministic_and_sized() -> None:
    assert generate(60, 3) == generate(60, 3)
    assert generate(60, 3) != generate(60, 4)
    assert len(generate(41, 1)) == 41


def test_every_answer_is_its_span_and_occurs_once_on_word_boundaries() -> None:
    for split in ("train", "dev"):
        for ex in _sample(1500, split):
            (answer,) = ex.answers
            assert answer.text.strip() == answer.text != ""
            assert ex.context[answer.start : answer.start + len(answer.text)] == answer.text
            assert ex.context.count(answer.text) == 1, (ex.question, answer.text)
            before = ex.context[answer.start - 1 : answer.start]
            after = ex.context[answer.start + len(answer.text) : answer.start + len(answer.text) + 1]
            assert not before.isalnum() and not after.isalnum(), (ex.context, answer.text)


def test_ids_unique_and_one_answer_per_question_in_a_context() -> None:
    examples = _sample(1500)
    assert len({e.id for e in examples}) == len(examples)
    seen: dict[tuple[str, str], str] = {}
    for e in examples:
        assert seen.setdefault((e.context, e.question), e.answers[0].text) == e.answers[0].text


def test_both_voices_and_every_question_kind_are_made() -> None:
    contexts = {e.context for e in _sample(1500)}
    assert any(re.search(r" (was|were) \w+ by ", c) for c in contexts)
    assert any(not re.search(r" (was|were) \w+ by ", c) for c in contexts)
    firsts = Counter(e.question.split()[0] for e in _sample(1500))
    for word in ("What", "Who", "When", "Where", "Why", "How", "Which", "With", "By"):
        assert firsts[word] > 10, firsts


def test_questions_often_use_another_verb_of_the_same_sense() -> None:
    # "Who mended the lantern?" of "Greaves repaired the lantern": at least a quarter of the questions about the
    # object or the agent use a verb the context does not.
    examples = [e for e in _sample(1500) if e.question.startswith(("Who ", "What did "))]
    reworded = 0
    for e in examples:
        words = set(re.findall(r"[a-z]+", e.context.lower()))
        verb = e.question.rstrip("?").split()[-1 if e.question.startswith("What did ") else 1].lower()
        reworded += verb not in words
    assert reworded / len(examples) > 0.25


def test_paragraphs_hold_distractors_of_the_same_kind() -> None:
    # Most paragraphs name two or more people and state three or more clauses, each with adjuncts.
    contexts = {e.context for e in _sample(1500)}
    assert sum(c.count(".") >= 3 for c in contexts) / len(contexts) > 0.9
    people = [e for e in _sample(1500) if e.question.startswith("Who ")]
    distracted = [e for e in people if len(re.findall(r"\b[A-Z][a-z]+ [A-Z][a-z]+\b", e.context)) >= 2]
    assert len(distracted) / len(people) > 0.8


def test_dev_split_uses_other_words() -> None:
    train = " ".join(e.context for e in _sample(1500))
    dev = _sample(400, "dev")
    assert {e.context for e in dev}.isdisjoint({e.context for e in _sample(1500)})
    dev_only = [e for e in dev if e.answers[0].text.lower() not in train.lower()]
    assert len(dev_only) / len(dev) > 0.3


def test_inflection() -> None:
    assert _verb("repair").past == "repaired"
    assert _verb("carry:carried").past == "carried"
    assert (_verb("sew:sewed:sewn").past, _verb("sew:sewed:sewn").participle) == ("sewed", "sewn")
    assert _verb("measure out").past == "measured out"
    assert _verb("study:studied").participle == "studied"
    assert [_plural(n) for n in ("box", "lorry", "knife", "chisel set", "bench")] == [
        "boxes",
        "lorries",
        "knives",
        "chisel sets",
        "benches",
    ]


def test_no_reference_sample_text() -> None:
    """The rainforest sample (sagebox/demo_data.py) is what invoke-INT8.py asks: none of it may be trained on."""

    def shingles(text: str) -> set[tuple[str, ...]]:
        tokens = re.findall(r"[a-z0-9]+", text.lower())
        return {tuple(tokens[i : i + 5]) for i in range(len(tokens) - 4)}

    sample = shingles(RAINFOREST_CONTEXT) | {s for q in RAINFOREST_QUESTIONS for s in shingles(q)}
    for e in _sample(1500):
        assert not shingles(e.context) & sample and not shingles(e.question) & sample
        assert "amazon" not in e.context.lower() and "rainforest" not in e.context.lower()
