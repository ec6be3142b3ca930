"""feature-extraction: one vector per text, normalised as the model says (or the request), truncation said."""

from __future__ import annotations

import numpy as np
import pytest

from container.manifest import PoolingSpec
from container.tasks.base import TRUNCATED_HEADER, BadParameters
from container.tasks.embeddings import FeatureExtraction
from container.tasks.text import TextEncoder
from tests.conftest import minilm_tokenizer_path

VECTOR = np.array([3.0, 4.0, 0.0], dtype=np.float32)


def task(normalize: bool = True, max_length: int = 32) -> FeatureExtraction:
    encoder = TextEncoder.from_file(str(minilm_tokenizer_path()), [16, 32], max_length)
    return FeatureExtraction(encoder, PoolingSpec(modes=["mean"], normalize=normalize, dimension=3))


def embed(t: FeatureExtraction, texts: list[str], raw: dict[str, object], batch: bool) -> tuple[object, dict[str, str]]:
    params = t.parse_parameters(raw)
    results = []
    for text in texts:
        windows = t.featurize(text, params)
        assert len(windows) == 1
        results.append(t.decode(text, windows, [(VECTOR,)], params))
    body, notes = t.render(texts, results, batch, params)
    return body, notes.headers()


def test_one_text_is_a_list_of_floats_and_many_a_list_of_lists() -> None:
    body, headers = embed(task(), ["hello"], {}, False)
    assert body == pytest.approx([0.6, 0.8, 0.0]) and headers == {}
    body, _ = embed(task(), ["a", "b"], {}, True)
    assert isinstance(body, list) and len(body) == 2 and body[1] == pytest.approx([0.6, 0.8, 0.0])


def test_normalisation_follows_the_model_unless_the_request_says() -> None:
    assert embed(task(normalize=False), ["x"], {}, False)[0] == pytest.approx([3.0, 4.0, 0.0])
    assert embed(task(normalize=True), ["x"], {"normalize": False}, False)[0] == pytest.approx([3.0, 4.0, 0.0])
    assert embed(task(normalize=False), ["x"], {"normalize": True}, False)[0] == pytest.approx([0.6, 0.8, 0.0])


def test_a_text_past_the_maximum_is_truncated_and_the_header_says_so() -> None:
    long = " ".join(f"word{i}" for i in range(100))
    _, headers = embed(task(), ["short", long, long], {}, True)
    assert headers == {TRUNCATED_HEADER: "2 input(s) truncated to 32 tokens"}


def test_parameters_are_checked() -> None:
    with pytest.raises(BadParameters, match="'truncation' can only be true"):
        task().parse_parameters({"truncation": False})
    with pytest.raises(BadParameters, match="unknown parameter"):
        task().parse_parameters({"pooling": "cls"})
    task().parse_parameters({"truncate": True, "normalize": True})
