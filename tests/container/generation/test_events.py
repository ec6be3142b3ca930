"""Answers and events in each API's shape: TGI's fields, and the OpenAI package's own types for the Messages API."""

from __future__ import annotations

import json

from openai.types.chat import ChatCompletion, ChatCompletionChunk

from container.generation.events import (
    DONE,
    EOS,
    LENGTH,
    STOP,
    ChatIds,
    Outcome,
    Token,
    chat_chunk,
    chat_completion,
    chat_usage_chunk,
    error_event,
    tgi_answer,
    tgi_token_event,
)

TOKENS = (Token(504, " Paris", -0.12), Token(30, ".", -0.5), Token(2, "", -0.01, special=True))
OUTCOME = Outcome(" Paris.", EOS, TOKENS, input_length=11, seed=None)
IDS = ChatIds("chatcmpl-0001", 1_765_000_000, "smollm2-135m-instruct")


def _data(event: bytes) -> object:
    assert event.startswith(b"data: ") and event.endswith(b"\n\n") and event.count(b"\n") == 2
    return json.loads(event[len(b"data: ") :])


def test_tgi_answer_with_and_without_details_and_full_text() -> None:
    assert tgi_answer(OUTCOME, "Capital?", details=False, full_text=False) == [{"generated_text": " Paris."}]
    [answer] = tgi_answer(OUTCOME, "Capital?", details=True, full_text=True)
    assert answer["generated_text"] == "Capital? Paris."
    assert answer["details"]["finish_reason"] == "eos_token" and answer["details"]["generated_tokens"] == 3
    assert answer["details"]["tokens"][0] == {"id": 504, "text": " Paris", "logprob": -0.12, "special": False}


def test_tgi_stream_events_carry_the_text_and_details_on_the_last_token_only() -> None:
    first = _data(tgi_token_event(0, TOKENS[0]))
    assert first == {
        "index": 0,
        "token": {"id": 504, "text": " Paris", "logprob": -0.12, "special": False},
        "generated_text": None,
        "details": None,
    }
    last = _data(tgi_token_event(2, TOKENS[2], OUTCOME))
    assert isinstance(last, dict) and last["generated_text"] == " Paris."
    assert last["details"] == {"finish_reason": "eos_token", "generated_tokens": 3, "seed": None, "input_length": 11}


def test_chat_completion_and_its_chunks_validate_as_the_openai_types() -> None:
    completion = ChatCompletion.model_validate(chat_completion(IDS, OUTCOME))
    assert completion.choices[0].message.content == " Paris." and completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens == 14
    stream = [
        chat_chunk(IDS, "", first=True),
        chat_chunk(IDS, " Paris"),
        chat_chunk(IDS, "."),
        chat_chunk(IDS, None, finish_reason=LENGTH),
        chat_usage_chunk(IDS, OUTCOME),
    ]
    chunks = [ChatCompletionChunk.model_validate(_data(event)) for event in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks[:-1]) == " Paris."
    assert chunks[3].choices[0].finish_reason == "length" and chunks[3].choices[0].delta.content is None
    assert chunks[4].choices == [] and chunks[4].usage is not None and chunks[4].usage.completion_tokens == 3
    assert DONE == b"data: [DONE]\n\n"


def test_stop_sequences_end_as_stop_in_chat_and_stop_sequence_in_tgi() -> None:
    stopped = Outcome("Paris", STOP, TOKENS[:1], 11, 42)
    assert chat_completion(IDS, stopped)["choices"][0]["finish_reason"] == "stop"
    assert tgi_answer(stopped, "", True, False)[0]["details"]["finish_reason"] == "stop_sequence"
    assert tgi_answer(stopped, "", True, False)[0]["details"]["seed"] == 42


def test_an_error_event_ends_a_failed_stream_with_a_reason() -> None:
    assert _data(error_event("the model process died")) == {
        "error": "the model process died",
        "error_type": "generation",
    }
