"""Wire formats of /invocations: content negotiation, parsing, rendering."""

from __future__ import annotations

import json

import pytest

from container import payload
from container.payload import JSON, JSON_LINES, PayloadError
from container.tasks.question_answering import Question


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, JSON), ("application/json; charset=utf-8", JSON), ("application/jsonlines", JSON_LINES)],
)
def test_request_format(header: str | None, expected: str) -> None:
    assert payload.request_format(header) == expected


def test_request_format_refuses_other_types_with_415() -> None:
    with pytest.raises(PayloadError) as err:
        payload.request_format("application/x-npy")
    assert err.value.status == 415


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, JSON),
        ("*/*", JSON),
        ("application/jsonlines", JSON_LINES),
        ("text/html, application/jsonlines;q=0.9", JSON_LINES),
    ],
)
def test_response_format(accept: str | None, expected: str) -> None:
    assert payload.response_format(accept) == expected


def test_response_format_406() -> None:
    with pytest.raises(PayloadError) as err:
        payload.response_format("text/csv")
    assert err.value.status == 406


def test_parse_single_batch_envelope_and_lines() -> None:
    one = {"question": "q", "context": "c"}
    assert payload.parse_request(json.dumps(one).encode(), JSON, 10).batch is False
    batch = payload.parse_request(json.dumps([one, one]).encode(), JSON, 10)
    assert batch.batch and len(batch.questions) == 2
    hf = payload.parse_request(json.dumps({"inputs": one}).encode(), JSON, 10)
    assert hf.questions[0] == Question("q", "c")
    lines = payload.parse_request(b'{"question":"a","context":"b"}\n\n{"question":"c","context":"d"}\n', JSON_LINES, 10)
    assert [q.question for q in lines.questions] == ["a", "c"]


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b'{"question": "q", "context": "c", "version": {}}', 400, "'version'"),
        (b'[{"question": "q", "context": "c"}, 5]', 400, "item 1"),
        (b"[" + b"[" * 5000 + b"]" * 5000 + b"]", 400, ""),
        (json.dumps([{"question": "q", "context": "c"}] * 11).encode(), 413, "limit is 10"),
    ],
)
def test_parse_errors(body: bytes, status: int, fragment: str) -> None:
    with pytest.raises(PayloadError) as err:
        payload.parse_request(body, JSON, 10)
    assert err.value.status == status
    assert fragment in str(err.value)


def test_a_byte_order_mark_is_ignored_and_escaped_surrogate_pairs_are_text() -> None:
    body = "\ufeff".encode() + b'{"question": "\\ud83d\\ude42?", "context": "c"}'
    assert payload.parse_request(body, JSON, 10).questions == [Question("\U0001f642?", "c")]
    lines = "\ufeff".encode() + b'{"question": "a", "context": "b"}\n'
    assert len(payload.parse_request(lines, JSON_LINES, 10).questions) == 1


@pytest.mark.parametrize("text", ["\\ud800", "x\\udc00", "\\ude42\\ud83d"])
def test_unpaired_surrogates_are_400(text: str) -> None:
    with pytest.raises(PayloadError) as err:
        payload.parse_request(
            b'[{"question": "q", "context": "c"}, {"question": "q", "context": "' + text.encode() + b'"}]', JSON, 10
        )
    assert err.value.status == 400
    assert "item 1: 'context' holds an unpaired UTF-16 surrogate" in str(err.value)


def test_render() -> None:
    answers = [{"answer": "a", "score": 0.5, "start": 0, "end": 1}]
    assert json.loads(payload.render(answers[0], False, JSON)) == answers[0]
    assert json.loads(payload.render(answers, True, JSON)) == answers
    assert payload.render(answers[0], False, JSON_LINES).decode().count("\n") == 1
    assert payload.render(answers * 2, True, JSON_LINES).decode().count("\n") == 2
    body = json.loads(payload.error_body(413, "too big"))
    assert body == {"error": "Payload Too Large", "status": 413, "message": "too big"}


def _classifier() -> object:
    from container.tasks.classification import TextClassification
    from container.tasks.text import TextEncoder
    from tests.conftest import minilm_tokenizer_path

    encoder = TextEncoder.from_file(str(minilm_tokenizer_path()), [16, 32], 32)
    return TextClassification(encoder, ["no", "yes"], "single_label_classification")


def test_the_inference_toolkit_envelope_for_a_text_task() -> None:
    from container.tasks.classification import TextInput

    task = _classifier()
    one = payload.parse_request(b'{"inputs": "great film"}', JSON, 10, task)  # type: ignore[arg-type]
    assert one.items == [TextInput("great film")] and not one.batch and one.parameters.top_k == -1
    bare = payload.parse_request(b'"great film"', JSON, 10, task)  # type: ignore[arg-type]
    assert bare.items == one.items
    many = payload.parse_request(
        b'{"inputs": ["a", {"text": "b", "text_pair": "c"}], "parameters": {"top_k": 2}}',
        JSON,
        10,
        task,  # type: ignore[arg-type]
    )
    assert many.batch and many.items[1] == TextInput("b", "c", as_pair=True) and many.parameters.top_k == 2
    lines = payload.parse_request(
        b'{"inputs": "a", "parameters": {"top_k": 1}}\n"b"\n',
        JSON_LINES,
        10,
        task,  # type: ignore[arg-type]
    )
    assert [i.text for i in lines.items] == ["a", "b"] and lines.parameters.top_k == 1


@pytest.mark.parametrize(
    ("body", "fmt", "fragment"),
    [
        (b'{"inputs": "a", "parameters": {"top_k": "x"}}', JSON, "'top_k' must be an integer"),
        (b'{"inputs": "a", "parameters": [1]}', JSON, "'parameters' must be an object"),
        (b'{"inputs": "a", "options": {}}', JSON, "unknown field(s) options beside 'inputs'"),
        (b'{"inputs": []}', JSON, "the request list is empty"),
        (b'{"inputs": 7}', JSON, "request must be a string or an object"),
        (b"", JSON, 'body is empty: send {"inputs": "a text"}'),
        (
            b'{"inputs": "a", "parameters": {"top_k": 1}}\n{"inputs": "b", "parameters": {"top_k": 2}}',
            JSON_LINES,
            "line 2: every line must carry the same parameters",
        ),
        (b'["a", "b"]\n', JSON_LINES, "line 1 holds a list"),
    ],
)
def test_a_bad_text_request_is_a_400_that_says_why(body: bytes, fmt: str, fragment: str) -> None:
    with pytest.raises(PayloadError) as err:
        payload.parse_request(body, fmt, 10, _classifier())  # type: ignore[arg-type]
    assert err.value.status == 400
    assert fragment in str(err.value)
