"""The hand-written tuning set (tests/data/tuning/tuning_qa.json): loadable, exact spans on word boundaries, no
text from the reference rainforest sample, and no paragraph shared with the generator."""

from __future__ import annotations

import re
from pathlib import Path

from sagebox.demo_data import RAINFOREST_CONTEXT
from sagebox.pipeline.squad import load_squad
from sagebox.pipeline.synth_squad import generate

TUNING = Path(__file__).resolve().parents[2] / "data" / "tuning" / "tuning_qa.json"


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def test_loads_with_exact_spans_on_word_boundaries() -> None:
    examples = load_squad(TUNING, check_spans=True)
    assert len(examples) >= 60
    assert len({e.context for e in examples}) >= 12
    assert len({e.id for e in examples}) == len(examples)
    for e in examples:
        for answer in e.answers:
            end = answer.start + len(answer.text)
            assert answer.start == 0 or not e.context[answer.start - 1].isalnum(), (e.id, answer.text)
            assert end == len(e.context) or not e.context[end].isalnum(), (e.id, answer.text)


def test_shares_no_text_with_the_rainforest_sample_or_the_generator() -> None:
    examples = load_squad(TUNING)
    sample = _shingles(RAINFOREST_CONTEXT, 6)
    generated: set[tuple[str, ...]] = set()
    for ex in generate(2000, 0):
        generated |= _shingles(ex.context, 8)
    for context in {e.context for e in examples}:
        assert not _shingles(context, 6) & sample
        assert not _shingles(context, 8) & generated, context[:60]
