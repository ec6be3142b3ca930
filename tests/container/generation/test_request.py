"""Both generation payloads read into one request; every bad field refused with a 400 reason that names it."""

from __future__ import annotations

from typing import Any

import pytest

from container.generation.request import CHAT, TGI, Limits, Message, Sampling, parse_request
from container.tasks.base import BadInput, BadParameters

LIMITS = Limits(max_new_tokens=512, default_new_tokens=64)
# What huggingface_hub's InferenceClient.text_generation sends: every parameter, most of them null.
HUB_CLIENT_PARAMETERS: dict[str, Any] = {
    "adapter_id": None,
    "best_of": None,
    "decoder_input_details": False,
    "details": True,
    "do_sample": False,
    "frequency_penalty": None,
    "grammar": None,
    "max_new_tokens": 20,
    "repetition_penalty": None,
    "return_full_text": False,
    "seed": None,
    "stop": [],
    "temperature": None,
    "top_k": None,
    "top_n_tokens": None,
    "top_p": None,
    "truncate": None,
    "typical_p": None,
    "watermark": False,
}


def test_a_bare_prompt_is_greedy_with_the_default_length() -> None:
    request = parse_request({"inputs": "Once upon a time"}, LIMITS)
    assert request.api == TGI and request.prompt == "Once upon a time"
    assert request.max_new_tokens == 64 and request.stop == () and not request.stream
    assert request.sampling == Sampling()


def test_what_the_hub_client_sends_is_accepted_and_nulls_mean_absent() -> None:
    request = parse_request({"inputs": "Hi", "parameters": HUB_CLIENT_PARAMETERS, "stream": True}, LIMITS)
    assert request.max_new_tokens == 20 and request.details and request.stream
    assert request.sampling == Sampling()


def test_a_warper_turns_sampling_on_as_tgi_does() -> None:
    warped = parse_request({"inputs": "Hi", "parameters": {"temperature": 0.7, "seed": 3}}, LIMITS)
    assert warped.sampling == Sampling(True, 0.7, 0, 1.0, 1.0, 3)
    explicit = parse_request({"inputs": "Hi", "parameters": {"do_sample": True, "top_k": 40, "top_p": 0.9}}, LIMITS)
    assert explicit.sampling.do_sample and explicit.sampling.top_k == 40 and explicit.sampling.top_p == 0.9
    penalty_only = parse_request({"inputs": "Hi", "parameters": {"repetition_penalty": 1.2}}, LIMITS)
    assert not penalty_only.sampling.do_sample and penalty_only.sampling.repetition_penalty == 1.2


def test_stop_sequences_a_string_or_a_list_deduplicated() -> None:
    assert parse_request({"inputs": "x", "parameters": {"stop": ["\n", "\n", "END"]}}, LIMITS).stop == ("\n", "END")
    assert parse_request({"messages": [{"role": "user", "content": "x"}], "stop": "END"}, LIMITS).stop == ("END",)


@pytest.mark.parametrize(
    ("body", "error", "names"),
    [
        ({"inputs": ""}, BadInput, "prompt is empty"),
        ({"inputs": "   "}, BadInput, "prompt is empty"),
        ({"inputs": ["a", "b"]}, BadInput, "one prompt string"),
        ({"inputs": 7}, BadInput, "must be a string"),
        ({"inputs": "a\ud800b"}, BadInput, "surrogate"),
        ({"inputs": "x", "parameters": {"max_new_tokens": -1}}, BadParameters, "'max_new_tokens' must be strictly"),
        ({"inputs": "x", "parameters": {"max_new_tokens": 0}}, BadParameters, "'max_new_tokens' must be strictly"),
        ({"inputs": "x", "parameters": {"max_new_tokens": 513}}, BadParameters, "at most 512"),
        ({"inputs": "x", "parameters": {"max_new_tokens": 2.5}}, BadParameters, "'max_new_tokens' must be an integer"),
        ({"inputs": "x", "parameters": {"max_new_tokens": True}}, BadParameters, "'max_new_tokens' must be an integer"),
        ({"inputs": "x", "parameters": {"top_p": 1.5}}, BadParameters, "'top_p' must be in (0, 1]"),
        ({"inputs": "x", "parameters": {"top_p": 0}}, BadParameters, "'top_p' must be in (0, 1]"),
        ({"inputs": "x", "parameters": {"top_k": 0}}, BadParameters, "'top_k' must be strictly positive"),
        ({"inputs": "x", "parameters": {"temperature": 0}}, BadParameters, "'temperature' must be strictly"),
        ({"inputs": "x", "parameters": {"temperature": "hot"}}, BadParameters, "'temperature' must be a number"),
        ({"inputs": "x", "parameters": {"repetition_penalty": -1}}, BadParameters, "'repetition_penalty'"),
        ({"inputs": "x", "parameters": {"seed": -4}}, BadParameters, "'seed'"),
        ({"inputs": "x", "parameters": {"seed": 2**64}}, BadParameters, "'seed'"),
        ({"inputs": "x", "parameters": {"stop": ["a", "b", "c", "d", "e"]}}, BadParameters, "at most 4 stop"),
        ({"inputs": "x", "parameters": {"stop": [""]}}, BadParameters, "empty stop sequence"),
        ({"inputs": "x", "parameters": {"stop": [1]}}, BadParameters, "a string or a list of strings"),
        ({"inputs": "x", "parameters": {"best_of": 2}}, BadParameters, "'best_of' is not supported"),
        ({"inputs": "x", "parameters": {"watermark": True}}, BadParameters, "'watermark' is not supported"),
        ({"inputs": "x", "parameters": {"grammar": {"type": "json"}}}, BadParameters, "'grammar' is not supported"),
        ({"inputs": "x", "parameters": {"typical_p": 0.5}}, BadParameters, "'typical_p' is not supported"),
        ({"inputs": "x", "parameters": {"temprature": 0.5}}, BadParameters, "unknown parameter(s) temprature"),
        ({"inputs": "x", "parameters": {"truncate": 0}}, BadParameters, "'truncate'"),
        ({"inputs": "x", "parameters": []}, BadParameters, "parameters must be an object"),
        ({"inputs": "x", "stream": "yes"}, BadParameters, "'stream' must be true or false"),
        ({"inputs": "x", "extra": 1}, BadInput, "unknown field(s) extra"),
        ({"inputs": "x", "messages": []}, BadInput, "not both"),
        ({"prompt": "x"}, BadInput, "needs 'inputs'"),
        (["x"], BadInput, "JSON object"),
        ({"messages": []}, BadInput, "non-empty list"),
        ({"messages": [{"role": "robot", "content": "x"}]}, BadInput, "messages[0].role must be one of"),
        ({"messages": [{"role": "user"}]}, BadInput, "messages[0].content"),
        ({"messages": [{"role": "user", "content": ""}]}, BadInput, "messages[0].content: the content is empty"),
        ({"messages": [{"role": "system", "content": "Be brief."}]}, BadInput, "at least one user"),
        ({"messages": ["hi"]}, BadInput, "messages[0] must be an object"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, BadInput, "text part"),
        ({"messages": [{"role": "user", "content": "x", "tool_calls": []}]}, BadInput, "unsupported field(s)"),
        ({"messages": [{"role": "user", "content": "x"}], "temperature": 2.5}, BadParameters, "[0, 2]"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 2}, BadParameters, "'n' is not supported"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, BadParameters, "'max_tokens'"),
        (
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5, "max_completion_tokens": 5},
            BadParameters,
            "not both",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, BadParameters, "'tools'"),
        ({"messages": [{"role": "user", "content": "x"}], "best_of": 1}, BadParameters, "unknown field(s) best_of"),
        ({"messages": [{"role": "user", "content": "x"}], "stream_options": {"x": 1}}, BadParameters, "include_usage"),
    ],
)
def test_each_bad_field_is_refused_by_name(body: Any, error: type[Exception], names: str) -> None:
    with pytest.raises(error) as caught:
        parse_request(body, LIMITS)
    assert names in str(caught.value)


def test_a_chat_request_with_content_parts_and_openai_nulls() -> None:
    body = {
        "model": "smollm2",
        "messages": [
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": [{"type": "text", "text": "Capital of "}, {"type": "text", "text": "France?"}]},
            {"role": "assistant", "content": ""},
        ],
        "max_tokens": 32,
        "temperature": None,
        "logprobs": False,
        "n": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = parse_request(body, LIMITS)
    assert request.api == CHAT and request.model == "smollm2" and request.stream and request.include_usage
    assert request.messages == (
        Message("system", "Answer in one sentence."),
        Message("user", "Capital of France?"),
        Message("assistant", ""),
    )
    assert request.max_new_tokens == 32 and request.sampling == Sampling(True, 1.0, 0, 1.0, 1.0, None)


def test_a_chat_temperature_of_zero_is_greedy() -> None:
    body = {"messages": [{"role": "user", "content": "x"}], "temperature": 0, "max_completion_tokens": 9, "seed": 5}
    request = parse_request(body, LIMITS)
    assert not request.sampling.do_sample and request.max_new_tokens == 9 and request.sampling.seed == 5
