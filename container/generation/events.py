"""What a generation answers, in each API's shape: whole answers and server-sent events.

TGI (https://huggingface.co/docs/text-generation-inference/en/reference/api_reference): a non-streamed answer on
SageMaker's `/invocations` is `[{"generated_text", "details"}]`; streamed, one event per token
`data: {"index", "token": {"id", "text", "logprob", "special"}, "generated_text": null, "details": null}` and on the
last token `generated_text` and `details` (`finish_reason` "length", "eos_token" or "stop_sequence",
`generated_tokens`, `seed`, `input_length`). The Messages API (OpenAI's chat completions): a `chat.completion`, or
`chat.completion.chunk` events, the first carrying the role, the last the `finish_reason` ("stop" or "length"),
then `data: [DONE]`. Every event is `data: <json>` and a blank line (the server-sent events format).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

LENGTH = "length"  # max_new_tokens reached, or the request's deadline (the tokens so far are the answer)
EOS = "eos_token"
STOP = "stop_sequence"
_CHAT_REASON = {LENGTH: "length", EOS: "stop", STOP: "stop"}
DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Token:
    id: int
    text: str  # the text this token released (may be "" while a character is incomplete)
    logprob: float
    special: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "logprob": round(self.logprob, 6), "special": self.special}


@dataclass(frozen=True)
class Outcome:
    """How a generation ended."""

    text: str  # the generated text (without the prompt)
    finish_reason: str  # LENGTH, EOS or STOP
    tokens: tuple[Token, ...]
    input_length: int  # prompt tokens
    seed: int | None
    # The token that ended the generation, delivered with this outcome instead of on its own (TGI's last event is
    # that token with the details); None when something else ended it (a deadline).
    final_token: Token | None = None

    def unstreamed(self, streamed_text: str) -> str:
        """What of the text no event carried yet (a deadline's held characters), given what was streamed."""
        return self.text[len(streamed_text) :] if self.text.startswith(streamed_text) else ""


def sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def error_event(message: str, error_type: str = "generation") -> bytes:
    """The event that ends a stream which failed after it began (TGI's ErrorResponse)."""
    return sse({"error": message, "error_type": error_type})


# --- TGI / LMI --------------------------------------------------------------------------------------------------------


def tgi_answer(outcome: Outcome, prompt: str, details: bool, full_text: bool) -> list[dict[str, Any]]:
    answer: dict[str, Any] = {"generated_text": (prompt + outcome.text) if full_text else outcome.text}
    if details:
        answer["details"] = {
            "finish_reason": outcome.finish_reason,
            "generated_tokens": len(outcome.tokens),
            "seed": outcome.seed,
            "prefill": [],
            "tokens": [token.as_json() for token in outcome.tokens],
        }
    return [answer]


def tgi_token_event(index: int, token: Token, outcome: Outcome | None = None) -> bytes:
    """One streamed token; the last one (`outcome` given) also carries the whole text and the details."""
    event: dict[str, Any] = {"index": index, "token": token.as_json(), "generated_text": None, "details": None}
    if outcome is not None:
        event["generated_text"] = outcome.text
        event["details"] = {
            "finish_reason": outcome.finish_reason,
            "generated_tokens": len(outcome.tokens),
            "seed": outcome.seed,
            "input_length": outcome.input_length,
        }
    return sse(event)


# --- Messages API -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatIds:
    id: str  # "chatcmpl-..."
    created: int  # Unix seconds
    model: str


def chat_completion(ids: ChatIds, outcome: Outcome) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": outcome.text},
                "logprobs": None,
                "finish_reason": _CHAT_REASON[outcome.finish_reason],
            }
        ],
        "usage": _usage(outcome),
    }


def chat_chunk(ids: ChatIds, content: str | None, first: bool = False, finish_reason: str | None = None) -> bytes:
    """One chunk: the first carries the assistant's role, the last (`finish_reason` given) no content."""
    delta: dict[str, Any] = {}
    if first:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    reason = _CHAT_REASON[finish_reason] if finish_reason is not None else None
    return sse(_chunk(ids, [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]))


def chat_usage_chunk(ids: ChatIds, outcome: Outcome) -> bytes:
    """The chunk `stream_options.include_usage` asks for: no choices, the token counts."""
    return sse({**_chunk(ids, []), "usage": _usage(outcome)})


def _chunk(ids: ChatIds, choices: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": ids.id,
        "object": "chat.completion.chunk",
        "created": ids.created,
        "model": ids.model,
        "choices": list(choices),
    }


def _usage(outcome: Outcome) -> dict[str, int]:
    completion = len(outcome.tokens)
    return {
        "prompt_tokens": outcome.input_length,
        "completion_tokens": completion,
        "total_tokens": outcome.input_length + completion,
    }
