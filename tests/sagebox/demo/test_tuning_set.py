"""The hand-written tuning sets (tests/data/tuning/tuning_qa.json and the record-like tests/data/tuning2): loadable,
exact spans on word boundaries, no text from the reference rainforest sample, and no paragraph shared with the
generator or the training corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sagebox.demo import qa_corpus
from sagebox.demo.synth_squad import generate
from sagebox.demo_data import RAINFOREST_CONTEXT
from sagebox.pipeline.data.squad import load_squad

DATA = Path(__file__).resolve().parents[2] / "data"
TUNING = DATA / "tuning" / "tuning_qa.json"
TUNING2 = DATA / "tuning2" / "tuning2_qa.json"
SETS = pytest.mark.parametrize("path", [TUNING, TUNING2], ids=["tuning", "tuning2"])


def _shingles(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


@SETS
def test_loads_with_exact_spans_on_word_boundaries(path: Path) -> None:
    examples = load_squad(path, check_spans=True)
    assert len(examples) >= 60
    assert len({e.context for e in examples}) >= 12
    assert len({e.id for e in examples}) == len(examples)
    for e in examples:
        for answer in e.answers:
            end = answer.start + len(answer.text)
            assert answer.start == 0 or not e.context[answer.start - 1].isalnum(), (e.id, answer.text)
            assert end == len(e.context) or not e.context[end].isalnum(), (e.id, answer.text)


@SETS
def test_shares_no_text_with_the_rainforest_sample_the_generator_or_the_corpus(path: Path) -> None:
    examples = load_squad(path)
    sample = _shingles(RAINFOREST_CONTEXT, 6)
    generated: set[tuple[str, ...]] = set()
    for ex in generate(2000, 0):
        generated |= _shingles(ex.context, 8)
    written = {run for article in qa_corpus.load() for run in _shingles(article.context, 8)}
    asked = {ex.question.lower() for article in qa_corpus.load() for ex in article.examples}
    for context in {e.context for e in examples}:
        assert not _shingles(context, 6) & sample
        assert not _shingles(context, 8) & generated, context[:60]
        assert not _shingles(context, 8) & written, context[:60]
    assert not {e.question.lower() for e in examples} & asked
