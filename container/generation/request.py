"""The two payloads a SageMaker LLM endpoint takes on `/invocations`, read into one typed request or refused (400).

- TGI / LMI: `{"inputs": str, "parameters": {...}, "stream": bool}`, the schema of Hugging Face's TGI container on
  SageMaker (https://huggingface.co/docs/text-generation-inference/en/reference/api_reference) and of LMI's
  (https://docs.djl.ai/master/docs/serving/serving/docs/lmi/user_guides/lmi_input_output_schema.html). Clients such
  as huggingface_hub's send every parameter, most of them null: null is read as absent, and a known parameter that
  asks for what this server does not do (a grammar, `best_of` > 1, a watermark) is refused by name.
- The Messages API: `{"messages": [...], "max_tokens", "temperature", "top_p", "stop", "seed", "stream", ...}`, as
  OpenAI's chat completions (https://platform.openai.com/docs/api-reference/chat/create) and TGI's Messages API
  (https://huggingface.co/docs/text-generation-inference/en/messages_api) take it. A temperature of 0 is greedy.

Range rules follow TGI's validation (strictly positive temperature, top_k and repetition_penalty; top_p in (0, 1]; at
most `max_stop_sequences` stop sequences); a prompt longer than the model's context is refused later, where the
prompt is tokenized. Every refusal is a BadParameters or BadInput whose message names the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from container.tasks.base import BadInput, BadParameters, check_known, kind_of, text_input

TGI = "tgi"
CHAT = "chat"
ROLES = ("system", "developer", "user", "assistant")
# Parameters of TGI's GenerateParameters this server accepts only at their "off" value (null, false, 0, 1, []).
_TGI_OFF: Mapping[str, tuple[Any, ...]] = {
    "best_of": (None, 1),
    "decoder_input_details": (None, False),
    "frequency_penalty": (None, 0, 0.0),
    "grammar": (None,),
    "top_n_tokens": (None, 0),
    "typical_p": (None, 1, 1.0),
    "watermark": (None, False),
    "adapter_id": (None,),
}
_TGI_KNOWN = (
    "max_new_tokens",
    "do_sample",
    "temperature",
    "top_k",
    "top_p",
    "repetition_penalty",
    "seed",
    "stop",
    "details",
    "return_full_text",
    "truncate",
    *_TGI_OFF,
)
# Fields of a chat completion request accepted only at their "off" value.
_CHAT_OFF: Mapping[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "logit_bias": (None, {}),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "response_format": (None, {"type": "text"}),
    "parallel_tool_calls": (None, False, True),
}
_CHAT_KNOWN = (
    "messages",
    "model",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "stream",
    "stream_options",
    "user",
    *_CHAT_OFF,
)
_MAX_SEED = 2**64 - 1  # TGI's seed is a u64


@dataclass(frozen=True)
class Limits:
    """What one request may ask of this endpoint (from the container's environment and the model's context)."""

    max_new_tokens: int  # the most tokens one request may generate
    default_new_tokens: int  # generated when the request names no limit
    max_stop_sequences: int = 4  # TGI's default for --max-stop-sequences
    max_stop_chars: int = 256


@dataclass(frozen=True)
class Sampling:
    """How each next token is chosen. Greedy (`do_sample` false) takes the most likely token; sampling applies the
    repetition penalty, the temperature, top-k and top-p, in that order, as transformers' generate() does."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1.0: off
    repetition_penalty: float = 1.0  # 1.0: off; applies to greedy choice too
    seed: int | None = None


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class GenerationRequest:
    api: str  # TGI or CHAT
    prompt: str  # the text to continue (TGI); empty for CHAT until the chat template renders `messages`
    messages: tuple[Message, ...]
    max_new_tokens: int
    stop: tuple[str, ...]
    sampling: Sampling
    stream: bool
    details: bool = False  # TGI: include `details` in a non-streamed answer
    return_full_text: bool = False  # TGI: prefix the prompt to generated_text
    truncate: int | None = None  # TGI: keep only the prompt's last N tokens
    model: str = ""  # CHAT: echoed in the answer
    include_usage: bool = False  # CHAT: a last chunk with token counts (stream_options.include_usage)
    sampling_named: tuple[str, ...] = field(default=())  # the sampling fields the request set (for details)
    explicit_max_new: bool = False  # the request named its limit (else the default, cut to what the prompt leaves)


def parse_request(body: Any, limits: Limits) -> GenerationRequest:
    """A decoded JSON body as a generation request; BadInput/BadParameters (400) name what is wrong."""
    if not isinstance(body, dict):
        raise BadInput(f"the request body must be a JSON object with 'inputs' or 'messages', got {kind_of(body)}")
    if "messages" in body:
        if "inputs" in body:
            raise BadInput("give either 'inputs' (a prompt) or 'messages' (a chat), not both")
        return _chat(body, limits)
    if "inputs" in body:
        return _tgi(body, limits)
    raise BadInput("the request body needs 'inputs' (a prompt to continue) or 'messages' (a chat)")


# --- TGI / LMI --------------------------------------------------------------------------------------------------------


def _tgi(body: Mapping[str, Any], limits: Limits) -> GenerationRequest:
    unknown = sorted(set(body) - {"inputs", "parameters", "stream"})
    if unknown:
        raise BadInput(f"unknown field(s) {', '.join(unknown)} (accepted: inputs, parameters, stream)")
    inputs = body["inputs"]
    if isinstance(inputs, list):
        raise BadInput("inputs must be one prompt string (send one request per prompt)")
    prompt = text_input(inputs, "inputs", "the prompt")
    raw = body.get("parameters")
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise BadParameters(f"parameters must be an object, got {kind_of(raw)}")
    raw = {key: value for key, value in raw.items() if value is not None}
    check_known(raw, _TGI_KNOWN, "text generation")
    _only_off(raw, _TGI_OFF)
    stop = _stops(raw.get("stop"), "stop", limits)
    max_new = _count(raw, "max_new_tokens", limits)
    temperature = _positive_float(raw, "temperature", 1.0)
    top_k = _positive_int(raw, "top_k", 0)
    top_p = _top_p(raw, "top_p")
    penalty = _positive_float(raw, "repetition_penalty", 1.0)
    do_sample = _bool(raw, "do_sample", False)
    # TGI samples when asked to, or when any warper is set (router/src/validation.rs: has_warpers).
    warpers = temperature != 1.0 or top_k != 0 or top_p < 1.0
    sampling = Sampling(do_sample or warpers, temperature, top_k, top_p, penalty, _seed(raw, "seed"))
    truncate = raw.get("truncate")
    if truncate is not None and (isinstance(truncate, bool) or not isinstance(truncate, int) or truncate < 1):
        raise BadParameters(f"parameter 'truncate' must be a positive integer, got {truncate!r}")
    return GenerationRequest(
        api=TGI,
        prompt=prompt,
        messages=(),
        max_new_tokens=max_new,
        explicit_max_new="max_new_tokens" in raw,
        stop=stop,
        sampling=sampling,
        stream=_bool(body, "stream", False),
        details=_bool(raw, "details", False),
        return_full_text=_bool(raw, "return_full_text", False),
        truncate=truncate,
        sampling_named=tuple(sorted(set(raw) & {"do_sample", "temperature", "top_k", "top_p", "seed"})),
    )


# --- Messages API -----------------------------------------------------------------------------------------------------


def _chat(body: Mapping[str, Any], limits: Limits) -> GenerationRequest:
    raw = {key: value for key, value in body.items() if value is not None}
    unknown = sorted(set(raw) - set(_CHAT_KNOWN))
    if unknown:
        raise BadParameters(f"unknown field(s) {', '.join(unknown)} for chat completions")
    _only_off(raw, _CHAT_OFF)
    messages = _messages(raw["messages"])
    if "max_tokens" in raw and "max_completion_tokens" in raw:
        raise BadParameters("give max_tokens or max_completion_tokens, not both")
    name = "max_completion_tokens" if "max_completion_tokens" in raw else "max_tokens"
    max_new = _count(raw, name, limits)
    temperature = raw.get("temperature", 1.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
        raise BadParameters(f"parameter 'temperature' must be a number in [0, 2], got {temperature!r}")
    top_p = _top_p(raw, "top_p")
    greedy = temperature == 0
    sampling = Sampling(not greedy, 1.0 if greedy else float(temperature), 0, top_p, 1.0, _seed(raw, "seed"))
    options = raw.get("stream_options") or {}
    if not isinstance(options, dict) or set(options) - {"include_usage"}:
        raise BadParameters("stream_options may hold only include_usage")
    model = raw.get("model", "")
    if not isinstance(model, str):
        raise BadParameters(f"model must be a string, got {kind_of(model)}")
    return GenerationRequest(
        api=CHAT,
        prompt="",
        messages=messages,
        max_new_tokens=max_new,
        explicit_max_new=name in raw,
        stop=_stops(raw.get("stop"), "stop", limits),
        sampling=sampling,
        stream=_bool(raw, "stream", False),
        model=model,
        include_usage=_bool(options, "include_usage", False),
        sampling_named=tuple(sorted(set(raw) & {"temperature", "top_p", "seed"})),
    )


def _messages(raw: Any) -> tuple[Message, ...]:
    if not isinstance(raw, list) or not raw:
        raise BadInput("messages must be a non-empty list of {role, content} objects")
    messages = []
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise BadInput(f"{where} must be an object with role and content, got {kind_of(item)}")
        role = item.get("role")
        if role not in ROLES:
            raise BadInput(f"{where}.role must be one of {', '.join(ROLES)}, got {role!r}")
        extra = sorted(set(item) - {"role", "content", "name"})
        if extra:
            raise BadInput(f"{where} has unsupported field(s) {', '.join(extra)}")
        messages.append(Message(role, _content(item.get("content"), f"{where}.content", role)))
    if all(message.role in ("system", "developer") for message in messages):
        raise BadInput("messages need at least one user or assistant message")
    return tuple(messages)


def _content(value: Any, where: str, role: str) -> str:
    """A string, or a list of text parts ({"type": "text", "text": ...}) joined, as OpenAI's content takes them."""
    if isinstance(value, list):
        parts = []
        for index, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise BadInput(f"{where}[{index}] must be a text part {{'type': 'text', 'text': ...}} (no images)")
            parts.append(part["text"])
        value = "".join(parts)
    if role == "assistant" and value == "":
        return value
    return text_input(value, where, "the content")


# --- shared fields ----------------------------------------------------------------------------------------------------


def _only_off(raw: Mapping[str, Any], off: Mapping[str, tuple[Any, ...]]) -> None:
    for name, allowed in off.items():
        value = raw.get(name)
        if name in raw and not any(value == a and isinstance(value, bool) == isinstance(a, bool) for a in allowed):
            raise BadParameters(f"parameter {name!r} is not supported by this endpoint (got {value!r})")


def _count(raw: Mapping[str, Any], name: str, limits: Limits) -> int:
    value = raw.get(name, limits.default_new_tokens)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadParameters(f"parameter {name!r} must be an integer, got {kind_of(value)}")
    if value < 1:
        raise BadParameters(f"parameter {name!r} must be strictly positive, got {value}")
    if value > limits.max_new_tokens:
        raise BadParameters(f"parameter {name!r} must be at most {limits.max_new_tokens} here, got {value}")
    return value


def _number(raw: Mapping[str, Any], name: str, default: float) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BadParameters(f"parameter {name!r} must be a number, got {value!r}")
    return float(value)


def _positive_float(raw: Mapping[str, Any], name: str, default: float) -> float:
    value = _number(raw, name, default)
    if value <= 0:
        raise BadParameters(f"parameter {name!r} must be strictly positive, got {value}")
    return value


def _positive_int(raw: Mapping[str, Any], name: str, default: int) -> int:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadParameters(f"parameter {name!r} must be an integer, got {kind_of(value)}")
    if name in raw and value <= 0:
        raise BadParameters(f"parameter {name!r} must be strictly positive, got {value}")
    return value


def _top_p(raw: Mapping[str, Any], name: str) -> float:
    value = _number(raw, name, 1.0)
    if not 0 < value <= 1:
        raise BadParameters(f"parameter {name!r} must be in (0, 1], got {value}")
    return value


def _seed(raw: Mapping[str, Any], name: str) -> int | None:
    value = raw.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_SEED:
        raise BadParameters(f"parameter {name!r} must be an integer in [0, 2**64 - 1], got {value!r}")
    return value


def _bool(raw: Mapping[str, Any], name: str, default: bool) -> bool:
    value = raw.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadParameters(f"parameter {name!r} must be true or false, got {kind_of(value)}")
    return value


def _stops(value: Any, name: str, limits: Limits) -> tuple[str, ...]:
    if value is None:
        return ()
    stops: Sequence[Any] = [value] if isinstance(value, str) else value
    if not isinstance(stops, list | tuple) or not all(isinstance(stop, str) for stop in stops):
        raise BadParameters(f"parameter {name!r} must be a string or a list of strings")
    if len(stops) > limits.max_stop_sequences:
        raise BadParameters(
            f"parameter {name!r} takes at most {limits.max_stop_sequences} stop sequences, got {len(stops)}"
        )
    for stop in stops:
        if not stop:
            raise BadParameters(f"parameter {name!r} holds an empty stop sequence")
        if len(stop) > limits.max_stop_chars:
            raise BadParameters(f"parameter {name!r}: a stop sequence is at most {limits.max_stop_chars} characters")
    return tuple(dict.fromkeys(stops))
