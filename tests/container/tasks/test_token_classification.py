"""token-classification: word pieces into entities (the pipeline's strategies) and windows merged."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from container.tasks.base import BadParameters
from container.tasks.entities import merge_overlapping
from container.tasks.text import TextEncoder
from container.tasks.token_classification import TokenClassification
from tests.conftest import minilm_tokenizer_path

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
TEXT = "Johnathan Smithers visited Reykjavik"


def task(max_length: int = 64) -> TokenClassification:
    encoder = TextEncoder.from_file(str(minilm_tokenizer_path()), [16, 32, 64], max_length)
    return TokenClassification(encoder, LABELS)


def logits_for(tags_by_token: list[str], length: int) -> np.ndarray:
    """Logits [length, labels] whose argmax is each token's tag (special tokens: O)."""
    logits = np.full((length, len(LABELS)), -4.0, dtype=np.float32)
    for index, tag in enumerate(tags_by_token):
        logits[index, LABELS.index(tag)] = 4.0
    return logits


def entities(t: TokenClassification, strategy: str, tags: list[str]) -> list[dict[str, Any]]:
    params = t.parse_parameters({"aggregation_strategy": strategy})
    [window] = t.featurize(TEXT, params)
    outputs = [(logits_for(tags, window.bucket),)]
    return t.decode(TEXT, [window], outputs, params)


def test_pieces_group_into_spans_with_character_offsets() -> None:
    t = task()
    [window] = t.featurize(TEXT, t.parse_parameters({}))
    tokens = list(window.tokens[: window.length])
    # [CLS] john ##athan smith ##ers visited rey ##k ##ja ##vik [SEP] (WordPiece of the MiniLM vocabulary)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "visited" in tokens
    visited = tokens.index("visited")
    tags = ["O"] + ["B-PER"] + ["I-PER"] * (visited - 2) + ["O"] + ["B-LOC"] + ["I-LOC"] * (len(tokens) - visited - 3)
    tags += ["O"]
    simple = entities(t, "simple", tags)
    assert [(e["entity_group"], e["start"], e["end"], e["word"]) for e in simple] == [
        ("PER", 0, 18, "johnathan smithers"),
        ("LOC", 27, 36, "reykjavik"),
    ]
    assert all(e["score"] == pytest.approx(1 / (1 + 4 * np.exp(-8.0)), rel=1e-5) for e in simple)
    none = entities(t, "none", tags)
    assert [e["entity"] for e in none] == [tag for tag in tags[1:-1] if tag != "O"]
    assert none[0]["index"] == 1 and none[0]["word"] == tokens[1]


def test_word_strategies_give_a_whole_word_its_first_pieces_label() -> None:
    t = task()
    [window] = t.featurize(TEXT, t.parse_parameters({}))
    tokens = list(window.tokens[: window.length])
    # Only the first piece of "johnathan" says B-PER; its continuation says O.
    tags = ["O", "B-PER"] + ["O"] * (len(tokens) - 2)
    simple = entities(t, "simple", tags)
    assert [(e["word"], e["end"]) for e in simple] == [(tokens[1], len(tokens[1]))]
    first = entities(t, "first", tags)
    assert [(e["word"], e["start"], e["end"]) for e in first] == [("johnathan", 0, 9)]


def test_a_b_tag_starts_a_new_entity_and_ignore_labels_drops_types() -> None:
    t = task()
    [window] = t.featurize(TEXT, t.parse_parameters({}))
    length = window.length
    tags = ["O", "B-PER", "B-PER"] + ["O"] * (length - 3)
    assert len(entities(t, "simple", tags)) == 2
    params = t.parse_parameters({"ignore_labels": ["O", "PER"]})
    outputs = [(logits_for(tags, window.bucket),)]
    assert t.decode(TEXT, [window], outputs, params) == []


def test_a_long_text_is_windowed_and_nothing_past_the_maximum_is_lost() -> None:
    t = task(max_length=16)
    text = " ".join(["paris"] * 40)
    params = t.parse_parameters({"stride": 4})
    windows = t.featurize(text, params)
    assert len(windows) > 3
    # every token a B-LOC: one entity per word, each word once although windows overlap
    outputs = [(logits_for(["O"] + ["B-LOC"] * (w.length - 2) + ["O"], w.bucket),) for w in windows]
    found = t.decode(text, windows, outputs, params)
    assert [(e["start"], e["end"]) for e in found] == [(i * 6, i * 6 + 5) for i in range(40)]


def test_overlapping_entities_keep_the_longer_then_the_more_confident() -> None:
    a = {"start": 0, "end": 5, "score": 0.9}
    b = {"start": 2, "end": 9, "score": 0.5}
    c = {"start": 10, "end": 12, "score": 0.4}
    d = {"start": 10, "end": 12, "score": 0.8}
    assert merge_overlapping([c, b, a, d]) == [b, d]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"aggregation_strategy": "longest"}, "must be one of none, simple, first, average, max"),
        ({"ignore_labels": "O"}, "'ignore_labels' must be a list"),
        ({"stride": -1}, "'stride' must be in [0"),
        ({"top_k": 1}, "unknown parameter(s) top_k for token-classification"),
    ],
)
def test_bad_parameters(raw: dict[str, object], fragment: str) -> None:
    with pytest.raises(BadParameters) as err:
        task().parse_parameters(raw)
    assert fragment in str(err.value)
