"""text-classification: inputs, parameters, scores from logits, and the pipeline's answer shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from container.tasks.base import POOLING_HEADER, TRUNCATED_HEADER, BadInput, BadParameters
from container.tasks.classification import TextClassification, TextInput, apply, default_function
from container.tasks.text import TextEncoder
from tests.conftest import minilm_tokenizer_path

LABELS = ["negative", "neutral", "positive"]
LOGITS = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def task(
    problem: str = "single_label_classification", labels: list[str] = LABELS, max_length: int = 64
) -> TextClassification:
    encoder = TextEncoder.from_file(str(minilm_tokenizer_path()), [16, 32, 64], max_length)
    return TextClassification(encoder, labels, problem)


def answer(
    t: TextClassification, item: TextInput, raw_params: dict[str, object], logits: list[np.ndarray]
) -> tuple[Any, dict[str, str], int]:
    params = t.parse_parameters(raw_params)
    features = t.featurize(item, params)
    scores = t.decode(item, features, [(row,) for row in logits[: len(features)]], params)
    body, notes = t.render([item], [scores], False, params)
    return body, notes.headers(), len(features)


def test_default_functions_follow_the_problem_type() -> None:
    assert default_function("single_label_classification", 3) == "softmax"
    assert default_function("multi_label_classification", 3) == "sigmoid"
    assert default_function("single_label_classification", 1) == "sigmoid"
    assert default_function("regression", 1) == "none"
    softmax = apply("softmax", LOGITS)
    assert softmax.sum() == pytest.approx(1.0) and softmax.argmax() == 2
    assert apply("sigmoid", LOGITS)[2] == pytest.approx(1 / (1 + np.exp(-2.0)))


def test_a_single_text_gets_a_one_element_list_and_top_k_a_ranked_list() -> None:
    t = task()
    body, headers, _ = answer(t, TextInput("good movie"), {}, [LOGITS])
    expected = apply("softmax", LOGITS)
    assert body == [{"label": "positive", "score": pytest.approx(float(expected[2]))}]
    assert headers == {}
    ranked, _, _ = answer(t, TextInput("good movie"), {"top_k": 2}, [LOGITS])
    assert [r["label"] for r in ranked] == ["positive", "negative"]
    every, _, _ = answer(t, TextInput("good movie"), {"top_k": None}, [LOGITS])
    assert [r["label"] for r in every] == ["positive", "negative", "neutral"]
    raw, _, _ = answer(t, TextInput("good movie"), {"function_to_apply": "none"}, [LOGITS])
    assert raw == [{"label": "positive", "score": 2.0}]


def test_a_pair_object_is_answered_with_a_dict_and_lists_with_one_answer_per_text() -> None:
    t = task()
    params = t.parse_parameters({})
    pair = t.parse_item({"text": "A man sleeps.", "text_pair": "Nobody sleeps."}, "request")
    assert pair == TextInput("A man sleeps.", "Nobody sleeps.", as_pair=True)
    windows = t.featurize(pair, params)
    assert set(windows[0].token_type_ids[: windows[0].length].tolist()) == {0, 1}
    scores = t.decode(pair, windows, [(LOGITS,)], params)
    body, _ = t.render([pair], [scores], False, params)
    assert isinstance(body, dict) and body["label"] == "positive"
    items = [TextInput("a"), TextInput("b")]
    batch, _ = t.render(items, [scores, scores], True, params)
    assert isinstance(batch, list) and all(isinstance(a, dict) for a in batch)
    ranked, _ = t.render(items, [scores, scores], True, t.parse_parameters({"top_k": 1}))
    assert all(isinstance(a, list) and len(a) == 1 for a in ranked)


def test_multi_label_scores_are_independent_sigmoids() -> None:
    t = task("multi_label_classification")
    body, _, _ = answer(t, TextInput("x"), {"top_k": None}, [LOGITS])
    assert [r["score"] for r in body] == pytest.approx(sorted(apply("sigmoid", LOGITS).tolist(), reverse=True))


def test_long_text_is_truncated_by_default_and_windowed_on_request() -> None:
    t = task(max_length=32)
    text = TextInput(" ".join(f"word{i}" for i in range(80)))
    _, headers, windows = answer(t, text, {}, [LOGITS] * 10)
    assert windows == 1 and headers[TRUNCATED_HEADER] == "1 input(s) truncated to 32 tokens"
    other = np.array([2.0, -1.0, 0.5], dtype=np.float32)
    pooled, headers, windows = answer(t, text, {"truncation": False, "top_k": None}, [LOGITS, other] * 10)
    assert windows > 1 and TRUNCATED_HEADER not in headers
    assert headers[POOLING_HEADER] == f"mean of the windows' scores (softmax) (input 0: {windows} windows)"
    per_window = [apply("softmax", LOGITS if i % 2 == 0 else other) for i in range(windows)]
    expected = np.mean(per_window, axis=0)
    assert {r["label"]: r["score"] for r in pooled} == {
        label: pytest.approx(float(value)) for label, value in zip(LABELS, expected, strict=True)
    }


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"top_k": 0}, "'top_k' must be in [1"),
        ({"top_k": "2"}, "'top_k' must be an integer"),
        ({"function_to_apply": "relu"}, "'function_to_apply' must be one of softmax, sigmoid, none"),
        ({"truncation": "yes"}, "'truncation' must be true or false"),
        ({"temperature": 1}, "unknown parameter(s) temperature for text-classification"),
    ],
)
def test_bad_parameters_are_named(raw: dict[str, object], fragment: str) -> None:
    with pytest.raises(BadParameters) as err:
        task().parse_parameters(raw)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (5, "must be a string or an object with 'text' and 'text_pair', got a number"),
        ({"text_pair": "b"}, "must be a string or an object with 'text'"),
        ({"text": "a", "label": 1}, "unknown field(s) label"),
        ("   ", "input is empty"),
        ({"text": "a", "text_pair": 3}, "'text_pair' must be a string"),
    ],
)
def test_bad_inputs_are_named(raw: object, fragment: str) -> None:
    with pytest.raises(BadInput) as err:
        task().parse_item(raw, "item 3")
    assert fragment in str(err.value) and str(err.value).startswith("item 3")
