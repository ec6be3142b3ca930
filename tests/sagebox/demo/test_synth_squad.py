from __future__ import annotations

import re
import string
from collections.abc import Callable
from functools import cache

from sagebox.demo.synth_squad import RELATIONS, generate
from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS
from sagebox.pipeline.data.squad import QAExample


@cache
def _sample(n: int, split: str = "train") -> tuple[QAExample, ...]:
    return tuple(generate(n, 0, split))


def test_deterministic_and_sized() -> None:
    assert generate(50, 3) == generate(50, 3)
    assert generate(50, 3) != generate(50, 4)
    assert len(generate(37, 1)) == 37


def test_every_answer_is_the_span_it_claims() -> None:
    for split in ("train", "dev"):
        for ex in generate(300, 2, split):
            (answer,) = ex.answers
            assert answer.text
            assert ex.context[answer.start : answer.start + len(answer.text)] == answer.text


def test_ids_unique_and_questions_unambiguous_within_a_paragraph() -> None:
    examples = generate(400, 0)
    assert len({e.id for e in examples}) == len(examples)
    seen: dict[tuple[str, str], str] = {}
    for e in examples:
        key = (e.context, e.question)
        assert seen.setdefault(key, e.answers[0].text) == e.answers[0].text


def test_paragraphs_hold_distractors_of_the_same_kind() -> None:
    # Most paragraphs state at least three facts, so the answer type alone does not find the answer.
    contexts = {e.context for e in generate(300, 0)}
    sentences = [c.count(".") for c in contexts]
    assert sum(n >= 3 for n in sentences) / len(sentences) > 0.8


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[\w.]+\}", template)
    return re.compile("^" + ".+".join(re.escape(p) for p in parts) + "$")


def test_dev_split_asks_wordings_training_never_sees() -> None:
    dev_only = [_pattern(t) for r in RELATIONS for t, _ in r.dev_questions]
    train_questions = [e.question for e in generate(2000, 0, "train")]
    dev_questions = [e.question for e in generate(400, 0, "dev")]
    assert not any(p.match(q) for q in train_questions for p in dev_only)
    held_out = sum(any(p.match(q) for p in dev_only) for q in dev_questions)
    assert 0.2 < held_out / len(dev_questions) < 0.8


def test_train_and_dev_use_different_names() -> None:
    def names(split: str) -> set[str]:
        return {e.answers[0].text for e in generate(500, 0, split) if e.answers[0].text[0].isupper()}

    train, dev = names("train"), names("dev")
    assert len(train & dev) / len(dev) < 0.2


def test_every_question_slot_is_stated_by_the_relation() -> None:
    """Questions ask only for slots the relation has, and each answer slot is written by at least one sentence."""
    fields = string.Formatter()
    for relation in RELATIONS:
        sentence_slots = {
            name.partition(".")[0] for s in relation.sentences for _, name, _, _ in fields.parse(s) if name is not None
        }
        for template, answer in relation.questions + relation.dev_questions:
            named = {name.partition(".")[0] for _, name, _, _ in fields.parse(template) if name is not None}
            assert named <= set(relation.slots), (template, named - set(relation.slots))
            assert answer.partition(".")[0] in sentence_slots, (template, answer)


def test_questions_of_every_kind_are_asked() -> None:
    questions = [e.question.lower() for e in _sample(3000)]
    for opener in ("who", "what", "when", "where", "which", "why", "how many", "how much", "how long", "how often"):
        share = sum(q.startswith(opener) or f" {opener} " in q for q in questions) / len(questions)
        assert share > 0.005, (opener, share)


def test_answers_of_many_shapes() -> None:
    answers = [e.answers[0].text for e in _sample(3000)]

    def share(test: Callable[[str], bool]) -> float:
        return sum(map(test, answers)) / len(answers)

    assert share(lambda a: bool(re.search(r"[£$€]", a))) > 0.02  # money with its symbol
    assert share(lambda a: bool(re.fullmatch(r"[\d,.]+ [a-z/°]+", a))) > 0.03  # numbers with units
    assert share(lambda a: bool(re.fullmatch(r"[\d,.]+", a))) > 0.05  # bare figures
    assert share(lambda a: " and " in a) > 0.01  # lists
    assert share(lambda a: len(a.split()) >= 5) > 0.03  # clauses (reasons, rules)


def test_how_many_unit_questions_take_the_bare_figure() -> None:
    """ "How many metres ...?" is answered by the figure alone, as SQuAD annotators cut it."""
    units = ("metres", "kilometres", "miles", "square kilometres", "hectares", "acres", "kg", "GB", "watts")
    checked = 0
    for e in _sample(3000):
        if any(e.question.startswith(f"How many {u} ") for u in units):
            assert re.fullmatch(r"[\d,.]+", e.answers[0].text), (e.question, e.answers[0].text)
            checked += 1
    assert checked > 10


def test_entities_are_named_shorter_after_their_first_mention() -> None:
    """Some contexts name a person in full and later by surname alone, as written text does."""
    contexts = sorted({e.context for e in generate(1500, 0)})
    shortened = 0
    for context in contexts:
        for first, last in re.findall(r"\b([A-Z][a-z]+) ([A-Z][a-z]+)\b", context):
            later = context[context.index(f"{first} {last}") + len(first) + len(last) + 1 :]
            if re.search(rf"(?<!{first} )\b{last}\b", later):
                shortened += 1
                break
    assert shortened / len(contexts) > 0.05


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def test_no_reference_sample_text_in_generated_data() -> None:
    """The rainforest sample (sagebox/demo_data.py) is what invoke-INT8.py asks: none of it may be trained on."""
    sample = _shingles(RAINFOREST_CONTEXT, 5) | {run for q in RAINFOREST_QUESTIONS for run in _shingles(q, 5)}
    for split in ("train", "dev"):
        for e in _sample(3000, split):
            assert not _shingles(e.context, 5) & sample, e.context
            assert not _shingles(e.question, 5) & sample, e.question
            assert "amazon" not in e.context.lower() and "rainforest" not in e.context.lower()
    patterns = [_pattern(t) for r in RELATIONS for t, _ in r.questions + r.dev_questions]
    assert not [q for q in RAINFOREST_QUESTIONS if any(p.match(q) for p in patterns)]
