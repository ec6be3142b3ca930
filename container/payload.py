"""Request bodies in, response bodies out: the /invocations wire formats, with no HTTP in sight."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from container.errors import ContainerError

JSON = "application/json"
JSON_LINES = "application/jsonlines"
_JSON_LINES_ALIASES = {
    "application/jsonlines",
    "application/x-jsonlines",
    "application/jsonl",
    "application/x-ndjson",
}
_JSON_ALIASES = {"application/json", "text/json"}


class PayloadError(ContainerError, ValueError):
    """A request the server must refuse; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Question:
    question: str
    context: str


@dataclass(frozen=True)
class Request:
    questions: list[Question]
    batch: bool  # the caller sent a list (or JSON Lines) and expects a list back


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def request_format(content_type: str | None) -> str:
    """JSON or JSON_LINES for a Content-Type header (absent means JSON); 415 for anything else."""
    kind = media_type(content_type)
    if kind in ("", *_JSON_ALIASES):
        return JSON
    if kind in _JSON_LINES_ALIASES:
        return JSON_LINES
    raise PayloadError(415, f"unsupported content type {kind!r}: send application/json or application/jsonlines")


def response_format(accept: str | None) -> str:
    """The first acceptable format in an Accept header (absent or */* means JSON); 406 when none is."""
    if not accept or not accept.strip():
        return JSON
    for part in accept.split(","):
        kind = media_type(part)
        if kind in ("*/*", "application/*", *_JSON_ALIASES):
            return JSON
        if kind in _JSON_LINES_ALIASES:
            return JSON_LINES
    raise PayloadError(406, f"cannot answer in {accept.strip()!r}: accept application/json or application/jsonlines")


def parse_request(body: bytes, fmt: str, max_questions: int) -> Request:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise PayloadError(400, "body is not valid UTF-8") from None
    # RFC 8259 section 8.1: a parser MAY ignore a byte order mark rather than treat it as an error; some clients
    # (PowerShell, .NET's UTF8Encoding(true)) send one.
    text = text.removeprefix("\ufeff")
    if fmt == JSON_LINES:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise PayloadError(400, "body holds no JSON lines")
        items = [_loads(line, f"line {n}") for n, line in enumerate(lines, 1)]
        return Request(_questions(items, max_questions), batch=True)
    data = _loads(text, "body")
    if isinstance(data, dict) and "inputs" in data and "question" not in data:
        data = data["inputs"]  # the Hugging Face inference toolkit's envelope
    if isinstance(data, list):
        if not data:
            raise PayloadError(400, "the request list is empty")
        return Request(_questions(data, max_questions), batch=True)
    return Request(_questions([data], max_questions), batch=False)


def _loads(text: str, where: str) -> Any:
    if not text.strip():
        raise PayloadError(400, f"{where} is empty: send a JSON object with 'question' and 'context'")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PayloadError(
            400, f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise PayloadError(400, f"{where} is nested too deeply") from None
    except ValueError:  # valid JSON that Python refuses to read: an integer longer than its digit limit
        raise PayloadError(
            400, f"{where} holds a number of more than {sys.get_int_max_str_digits()} digits, too long to read"
        ) from None


def _questions(items: list[Any], max_questions: int) -> list[Question]:
    if len(items) > max_questions:
        raise PayloadError(413, f"{len(items)} questions in one request; the limit is {max_questions}")
    return [_question(item, index if len(items) > 1 else None) for index, item in enumerate(items)]


def _question(item: Any, index: int | None) -> Question:
    where = "request" if index is None else f"item {index}"
    if not isinstance(item, dict):
        raise PayloadError(400, f"{where} must be a JSON object with 'question' and 'context', got {_kind(item)}")
    fields = {}
    for name in ("question", "context"):
        if name not in item:
            raise PayloadError(400, f"{where} is missing the field {name!r}")
        value = item[name]
        if not isinstance(value, str):
            raise PayloadError(400, f"{where}: {name!r} must be a string, got {_kind(value)}")
        if not value.strip():
            raise PayloadError(400, f"{where}: {name!r} is empty")
        _check_unicode(value, f"{where}: {name!r}")
        fields[name] = value
    version = item.get("version")
    if version is not None and not isinstance(version, str | int | float):
        raise PayloadError(400, f"{where}: 'version' must be a string or number, got {_kind(version)}")
    return Question(question=fields["question"], context=fields["context"])


def _check_unicode(value: str, where: str) -> None:
    """Refuse text that is not Unicode: a JSON escape of one half of a UTF-16 surrogate pair ("\\ud800") parses, but no
    tokenizer or UTF-8 response can carry it (RFC 8259 section 8.2 leaves such strings' behaviour unpredictable)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        raise PayloadError(
            400, f"{where} holds an unpaired UTF-16 surrogate (\\u{ord(char):04x}) at character {exc.start}"
        ) from None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def render(answers: list[dict[str, Any]], batch: bool, fmt: str) -> bytes:
    if fmt == JSON_LINES:
        return "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in answers).encode("utf-8")
    payload: Any = answers if batch else answers[0]
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def reason(status: int) -> str:
    return _REASONS.get(status, "Error")


def error_body(status: int, message: str) -> bytes:
    return json.dumps({"error": reason(status), "status": status, "message": message}).encode("utf-8")


_REASONS = {
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
