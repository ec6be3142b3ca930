"""Server-sent events read from bytes that arrive in arbitrary pieces, and the text a text-generation stream carries.

A streamed answer (`text/event-stream`) reaches a client in pieces whose boundaries mean nothing: SageMaker's
InvokeEndpointWithResponseStream relays PayloadPart events as the container's writes arrive, and an HTTP client reads
whatever the socket holds. So a piece may end inside an event, inside a line, or inside a multi-byte UTF-8 character.
`SseDecoder` keeps the bytes until a line is complete (a newline byte never occurs inside a UTF-8 sequence, so a
whole line always decodes) and an event until its blank line, as the WHATWG server-sent events format says: `data:`
lines joined by a newline, one optional space after the colon, comments (`:`) and other fields ignored, LF or CRLF
line ends.

`stream_text` turns the events of either streaming API the server speaks into the text to show: TGI's token events
(`token.text`, special tokens' text left out) and OpenAI chat chunks (`choices[0].delta.content`), ending at
`[DONE]`; an error event (`{"error": ...}`) raises StreamFailed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

DONE = "[DONE]"


class StreamFailed(Exception):
    """The stream carried an error event (the generation failed after it began)."""


@dataclass
class SseDecoder:
    """Feed it the bytes as they come; it returns each complete event's data (the `data:` lines joined)."""

    _pending: bytes = b""
    _data: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> list[str]:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        events: list[str] = []
        for raw in lines:
            event = self._line(raw.removesuffix(b"\r").decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[str]:
        """The last event, if the stream ended without the blank line that closes it."""
        events = self.feed(b"\n") if self._pending else []
        if self._data:
            events.append("\n".join(self._data))
            self._data = []
        return events

    def _line(self, line: str) -> str | None:
        if not line:  # the blank line that dispatches an event
            if not self._data:
                return None
            data, self._data = "\n".join(self._data), []
            return data
        if line.startswith(":"):  # a comment (keep-alive)
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        return None


def sse_events(chunks: Iterable[bytes]) -> Iterator[str]:
    """Every event's data in byte pieces split anywhere."""
    decoder = SseDecoder()
    for chunk in chunks:
        yield from decoder.feed(chunk)
    yield from decoder.close()


def event_text(event: Any) -> str:
    """The text one decoded event adds: a TGI token's (not a special token's), or a chat chunk's delta content."""
    if not isinstance(event, dict):
        return ""
    if "error" in event:
        raise StreamFailed(str(event.get("error") or "the stream ended with an error event"))
    token = event.get("token")
    if isinstance(token, dict):
        text = token.get("text")
        return text if isinstance(text, str) and not token.get("special") else ""
    choices = event.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        delta = choices[0].get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        return content if isinstance(content, str) else ""
    return ""


def parse_event(data: str) -> Any:
    """An event's data as JSON; StreamFailed names data that is not JSON."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise StreamFailed(f"the stream sent an event that is not JSON ({exc.msg}): {data[:80]!r}") from None


def stream_text(chunks: Iterable[bytes]) -> Iterator[str]:
    """The text of a generation's events as they complete (empty pieces left out), up to `[DONE]`."""
    for data in sse_events(chunks):
        if data.strip() == DONE:
            return
        text = event_text(parse_event(data))
        if text:
            yield text
