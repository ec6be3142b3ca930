"""Request bodies in, response bodies out: the /invocations wire formats, with no HTTP in sight."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from container.errors import ContainerError
from container.tasks.base import BadInput, BadParameters, kind_of

if TYPE_CHECKING:
    from container.tasks import Task

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
class Request:
    items: list[Any]  # the task's parsed inputs, in order
    batch: bool  # the caller sent a list (or JSON Lines) and expects a list back
    parameters: Any = None  # the task's parsed `parameters` (one set for the whole request)

    @property
    def questions(self) -> list[Any]:
        """A question-answering request's questions (its items)."""
        return self.items


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


def parse_request(body: bytes, fmt: str, max_items: int, task: Task | None = None) -> Request:
    """The request's inputs and parameters in the Hugging Face inference toolkit's envelope
    (`{"inputs": ..., "parameters": {...}}`, inputs one or a list) or bare (an input, or a list of them); JSON Lines
    carry one input (bare or enveloped) per line. `task` checks each input and the parameters (default: question
    answering, the task of models built before there were others)."""
    if task is None:
        from container.tasks.question_answering import QuestionAnswering

        return parse_request(body, fmt, max_items, QuestionAnswering.unbound())
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise PayloadError(400, "body is not valid UTF-8") from None
    # RFC 8259 section 8.1: a parser MAY ignore a byte order mark rather than treat it as an error; some clients
    # (PowerShell, .NET's UTF8Encoding(true)) send one.
    text = text.removeprefix("\ufeff")
    example = getattr(task, "example", "a JSON request")
    if fmt == JSON_LINES:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise PayloadError(400, "body holds no JSON lines")
        raw_items, parameters = [], None
        for n, line in enumerate(lines, 1):
            value, line_parameters = _unwrap(_loads(line, f"line {n}", example), task)
            if isinstance(value, list):
                raise PayloadError(400, f"line {n} holds a list: JSON Lines carry one input per line")
            if line_parameters is not None and parameters is not None and line_parameters != parameters:
                raise PayloadError(400, f"line {n}: every line must carry the same parameters")
            parameters = line_parameters if line_parameters is not None else parameters
            raw_items.append(value)
        return _request(task, raw_items, True, parameters or {}, max_items)
    data, parameters = _unwrap(_loads(text, "body", example), task)
    if isinstance(data, list):
        if not data:
            raise PayloadError(400, "the request list is empty")
        return _request(task, data, True, parameters or {}, max_items)
    return _request(task, [data], False, parameters or {}, max_items)


def _unwrap(data: Any, task: Task) -> tuple[Any, dict[str, Any] | None]:
    """(inputs, parameters) of the inference toolkit's envelope; a bare input is its own inputs."""
    if not isinstance(data, dict) or "inputs" not in data or (task.name == "question-answering" and "question" in data):
        return data, None
    unknown = sorted(set(data) - {"inputs", "parameters"})
    if unknown:
        raise PayloadError(400, f"unknown field(s) {', '.join(unknown)} beside 'inputs' (and 'parameters')")
    parameters = data.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise PayloadError(400, f"'parameters' must be an object, got {kind_of(parameters)}")
    return data["inputs"], parameters


def _request(task: Task, raw_items: list[Any], batch: bool, parameters: dict[str, Any], max_items: int) -> Request:
    if len(raw_items) > max_items:
        raise PayloadError(413, f"{len(raw_items)} inputs in one request; the limit is {max_items}")
    try:
        items = [
            task.parse_item(raw, "request" if len(raw_items) == 1 and not batch else f"item {index}")
            for index, raw in enumerate(raw_items)
        ]
        parsed = task.parse_parameters(parameters)
    except (BadInput, BadParameters) as exc:
        raise PayloadError(400, str(exc)) from None
    return Request(items, batch, parsed)


def _loads(text: str, where: str, example: str = "a JSON request") -> Any:
    if not text.strip():
        raise PayloadError(400, f"{where} is empty: send {example}")
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


def render(body: Any, batch: bool, fmt: str) -> bytes:
    """The response body: `body` as JSON, or with JSON Lines one line per input (`body` is then the list of the
    inputs' answers, or the single input's answer)."""
    if fmt == JSON_LINES:
        lines = body if batch else [body]
        return "".join(json.dumps(a, ensure_ascii=False) + "\n" for a in lines).encode("utf-8")
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


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
