from __future__ import annotations

import re

from sagebox.pipeline.synth_squad import RELATIONS, generate


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
