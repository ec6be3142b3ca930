"""Server-sent events re-split from byte pieces cut anywhere (inside an event, a line, a multi-byte UTF-8 character),
and the text of TGI token events and OpenAI chat chunks, up to [DONE]."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest

from sagebox.sse import SseDecoder, StreamFailed, event_text, sse_events, stream_text


def sse(event: Any) -> bytes:
    return b"data: " + json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def tgi(index: int, text: str, special: bool = False, last: bool = False) -> dict[str, Any]:
    return {
        "index": index,
        "token": {"id": index, "text": text, "logprob": -1.0, "special": special},
        "generated_text": "whole" if last else None,
        "details": {"finish_reason": "eos_token", "generated_tokens": index + 1} if last else None,
    }


def chunk(content: str | None, role: bool = False) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


# Two-, three- and four-byte characters, a newline inside a token's text (escaped in JSON), an event of two data lines.
TEXTS = ["Il était", " une ", "fois 日本", "\n", "🤖🎨", "."]
TGI_STREAM = b"".join(
    [*(sse(tgi(i, t)) for i, t in enumerate(TEXTS)), sse(tgi(len(TEXTS), "</s>", special=True, last=True))]
)
CHAT_STREAM = b"".join(
    [sse(chunk("", role=True)), *(sse(chunk(t)) for t in TEXTS), sse(chunk(None)), b"data: [DONE]\n\n"]
)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize("stream", [TGI_STREAM, CHAT_STREAM], ids=["tgi", "chat"])
def test_every_single_cut_gives_the_same_text(stream: bytes) -> None:
    for cut in range(len(stream) + 1):
        assert "".join(stream_text(pieces(stream, [cut]))) == "".join(TEXTS), cut


@pytest.mark.parametrize("stream", [TGI_STREAM, CHAT_STREAM], ids=["tgi", "chat"])
def test_byte_by_byte_and_random_pieces_give_the_same_text(stream: bytes) -> None:
    assert list(stream_text([bytes([b]) for b in stream])) == TEXTS
    rng = random.Random(5)
    for _ in range(200):
        cuts = rng.sample(range(1, len(stream)), rng.randint(1, 30))
        assert list(stream_text(pieces(stream, cuts))) == TEXTS


def test_a_cut_inside_a_multibyte_character_waits_for_its_other_bytes() -> None:
    data = sse(chunk("🤖"))
    robot = data.index("🤖".encode())
    decoder = SseDecoder()
    assert decoder.feed(data[: robot + 2]) == []  # half the character: nothing yet, and no replacement character
    [event] = decoder.feed(data[robot + 2 :])
    assert event_text(json.loads(event)) == "🤖"


def test_the_event_format_crlf_comments_fields_and_multiline_data() -> None:
    raw = b': keep-alive\r\nevent: token\r\nid: 7\r\ndata: {"a":\r\ndata:1}\r\n\r\ndata:x\n\n\n\ndata: y'
    assert list(sse_events(pieces(raw, [5, 17, 33, 40]))) == ['{"a":\n1}', "x", "y"]  # y: closed by the end
    assert list(sse_events([b"retry: 10\n\n", b": only a comment\n\n"])) == []


def test_done_ends_the_text_and_what_follows_is_not_read() -> None:
    after_done = CHAT_STREAM + sse(chunk("ignored"))
    assert "".join(stream_text([after_done])) == "".join(TEXTS)


def test_special_tokens_and_role_only_chunks_add_no_text() -> None:
    assert event_text(tgi(0, "</s>", special=True)) == ""
    assert event_text(chunk("", role=True)) == ""
    assert event_text(chunk(None)) == ""
    assert event_text({"object": "chat.completion.chunk", "choices": [], "usage": {"completion_tokens": 3}}) == ""
    assert event_text(tgi(0, "Hi")) == "Hi" and event_text(chunk("Hi")) == "Hi"


def test_an_error_event_or_a_broken_event_fails_the_stream() -> None:
    failing = sse(chunk("So far")) + sse({"error": "the model failed: RuntimeError", "error_type": "generation"})
    text = []
    with pytest.raises(StreamFailed, match="the model failed"):
        for piece in stream_text(pieces(failing, [10, 50])):
            text.append(piece)
    assert text == ["So far"]  # what came before the error was delivered
    with pytest.raises(StreamFailed, match="not JSON"):
        list(stream_text([b"data: {oops\n\n"]))
