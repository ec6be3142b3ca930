"""A text-generation endpoint's answer through InvokeEndpointWithResponseStream (sagebox.invoke.invoke_stream,
`sagebox invoke --stream`, scripts/invoke-stream.py), on a stand-in runtime client: PayloadParts cut anywhere print
as the tokens they carry; a ModelStreamError or an error event ends with one line on stderr and exit 1; a model at
capacity before the stream is retried. tests/sagebox/box/test_gateway_stream_invoke.py runs the same through the
box's gateway and a real server."""

from __future__ import annotations

import argparse
import io
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError, EventStreamError

from sagebox.cli import invoke as cli_invoke
from sagebox.cli.app import main
from sagebox.errors import SageboxError
from sagebox.invoke import (
    Retry,
    generated_text,
    generation_request,
    invoke_stream,
    payload_parts,
    write_pieces,
)
from tests.sagebox.test_invoke import model_error


def sse(event: Any) -> bytes:
    return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def chunk(content: str | None, role: bool = False) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"} if role else {}
    if content is not None:
        delta["content"] = content
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


WORDS = ["Un ", "robot ", "peint ", "l'été ", "🎨"]
CHAT = b"".join([sse(chunk("", role=True)), *(sse(chunk(w)) for w in WORDS), b"data: [DONE]\n\n"])
# The stream up to the middle of its third event: the role chunk and "Un " arrived, "robot " did not.
BROKEN = CHAT[: len(sse(chunk("", role=True))) + len(sse(chunk("Un "))) + 20]


def cut_everywhere(data: bytes, size: int = 3) -> list[bytes]:
    """Parts of `size` bytes: boundaries inside events, lines and the multi-byte characters."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def stream_error(code: str = "ModelStreamError", message: str = "Stream broke: container exited") -> EventStreamError:
    return EventStreamError({"Error": {"Code": code, "Message": message}}, "InvokeEndpointWithResponseStream")


class StreamingRuntime:
    """Stands in for the sagemaker-runtime client's InvokeEndpointWithResponseStream: raises the queued errors at the
    call, then streams the parts (and raises `broken` after them, as botocore does for an error event)."""

    def __init__(self, parts: list[bytes], *errors: ClientError, broken: ClientError | None = None) -> None:
        self.parts, self.errors, self.broken = parts, list(errors), broken
        self.calls: list[dict[str, Any]] = []

    def invoke_endpoint_with_response_stream(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return {"Body": self._events(), "ContentType": "text/event-stream"}

    def _events(self) -> Iterator[dict[str, Any]]:
        for part in self.parts:
            yield {"PayloadPart": {"Bytes": part}}
        if self.broken is not None:
            raise self.broken


def test_parts_cut_anywhere_stream_as_the_words_they_carry() -> None:
    runtime = StreamingRuntime(cut_everywhere(CHAT))
    request = generation_request(prompt="Paint", max_tokens=32, stream=True)
    assert "".join(invoke_stream(runtime, "llm", request, "trace=1")) == "".join(WORDS)
    [call] = runtime.calls
    assert call["EndpointName"] == "llm" and call["CustomAttributes"] == "trace=1"
    assert json.loads(call["Body"]) == {
        "messages": [{"role": "user", "content": "Paint"}],
        "max_tokens": 32,
        "stream": True,
    }


def test_a_stream_that_breaks_is_one_line_after_what_arrived() -> None:
    runtime = StreamingRuntime(cut_everywhere(BROKEN), broken=stream_error())
    out = io.StringIO()
    with pytest.raises(SageboxError) as err:
        write_pieces(invoke_stream(runtime, "llm", {"inputs": "x", "stream": True}), out)
    assert str(err.value) == "endpoint llm: the stream broke: ModelStreamError: Stream broke: container exited"
    assert out.getvalue() == "Un \n"  # what arrived, and a newline so the error's line stands alone


def test_an_error_event_is_one_line() -> None:
    parts = [sse(chunk("So")), sse({"error": "the model failed: boom", "error_type": "generation"})]
    with pytest.raises(SageboxError, match="failed mid-stream: the model failed: boom"):
        list(invoke_stream(StreamingRuntime(parts), "llm", {"inputs": "x"}))


def test_a_model_at_capacity_is_retried_before_the_stream_and_a_bad_request_is_said_at_once() -> None:
    slept: list[float] = []
    runtime = StreamingRuntime([CHAT], model_error(503, "1"))
    retry = Retry(sleep=slept.append, rng=random.Random(3))
    assert "".join(invoke_stream(runtime, "llm", {"inputs": "x"}, retry=retry)) == "".join(WORDS)
    assert len(runtime.calls) == 2 and 1.0 <= slept[0] <= 1.5
    with pytest.raises(SageboxError, match="the model answered 400: boom"):
        list(invoke_stream(StreamingRuntime([CHAT], model_error(400)), "llm", {"inputs": "x"}, retry=retry))


def test_payload_parts_skip_other_events() -> None:
    events = [{"PayloadPart": {"Bytes": b"ab"}}, {"Other": {}}, {"PayloadPart": {}}, {"PayloadPart": {"Bytes": b"c"}}]
    assert list(payload_parts(events)) == [b"ab", b"", b"c"]


def test_generation_requests_for_both_apis() -> None:
    assert generation_request(inputs="Once", max_tokens=5, parameters={"temperature": 0.5}) == {
        "inputs": "Once",
        "parameters": {"max_new_tokens": 5, "temperature": 0.5},
        "stream": False,
    }
    assert generation_request(inputs="Once", stream=True) == {"inputs": "Once", "stream": True}
    chat = '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]'
    assert generation_request(messages=chat, parameters={"temperature": 0}, stream=True) == {
        "messages": json.loads(chat),
        "temperature": 0,
        "stream": True,
    }
    for bad in (
        {},
        {"prompt": "a", "inputs": "b"},
        {"messages": "[1]"},
        {"messages": "{"},
        {"prompt": "a", "max_tokens": 0},
    ):
        with pytest.raises(SageboxError):
            generation_request(**bad)


def test_generated_text_of_either_answer() -> None:
    completion = {"object": "chat.completion", "choices": [{"message": {"role": "assistant", "content": "Hello"}}]}
    assert generated_text(completion) == "Hello"
    assert generated_text([{"generated_text": "Once upon"}]) == "Once upon"


def _stand_in(monkeypatch: pytest.MonkeyPatch, runtime: Any) -> list[argparse.Namespace]:
    seen: list[argparse.Namespace] = []

    def resolve(args: argparse.Namespace, variant: str | None, task: str | None = "question-answering") -> Any:
        seen.append(args)
        assert (variant, task) == ("fp32", "text-generation")
        return args.endpoint or "sagebox-c6i-llm", runtime

    monkeypatch.setattr(cli_invoke, "resolve_endpoint", resolve)
    return seen


def test_sagebox_invoke_stream_prints_the_tokens(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    runtime = StreamingRuntime(cut_everywhere(CHAT, 5))
    _stand_in(monkeypatch, runtime)
    argv = ["invoke", "--stream", "--prompt", "Paint", "--max-tokens", "20", "--parameters", '{"temperature": 0}']
    assert main(argv) == 0
    assert capsys.readouterr().out == "".join(WORDS) + "\n"
    assert json.loads(runtime.calls[0]["Body"])["temperature"] == 0


def test_sagebox_invoke_stream_that_breaks_exits_1_with_one_line(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    _stand_in(monkeypatch, StreamingRuntime(cut_everywhere(BROKEN), broken=stream_error()))
    assert main(["invoke", "--stream", "--inputs", "Once", "--endpoint", "llm"]) == 1
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("sagebox: error: endpoint llm: the stream broke: ModelStreamError")
    assert captured.out == "Un \n"


def test_stream_without_a_prompt_is_refused(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    _stand_in(monkeypatch, StreamingRuntime([CHAT]))
    assert main(["invoke", "--stream"]) == 1
    assert "one of a prompt, messages or inputs" in capsys.readouterr().err


def test_invoke_without_stream_prints_the_whole_answer(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    class Whole:
        def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
            assert json.loads(kwargs["Body"]) == {"inputs": "Once", "stream": False}
            return {"Body": io.BytesIO(b'[{"generated_text": " upon a time"}]')}

    _stand_in(monkeypatch, Whole())
    assert main(["invoke", "--inputs", "Once"]) == 0
    assert capsys.readouterr().out == " upon a time\n"


def test_the_stream_script(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    runtime = StreamingRuntime([CHAT])
    seen = _stand_in(monkeypatch, runtime)
    assert cli_invoke.stream_script_main(["c6i-llm", "Tell me a story", "--max-tokens", "8"]) == 0
    assert capsys.readouterr().out == "".join(WORDS) + "\n"
    assert seen[0].endpoint == "c6i-llm"
    body = json.loads(runtime.calls[0]["Body"])
    assert body["messages"] == [{"role": "user", "content": "Tell me a story"}] and body["max_tokens"] == 8
    assert cli_invoke.stream_script_main(["c6i-llm", "Once", "--raw"]) == 0
    assert json.loads(runtime.calls[1]["Body"]) == {
        "inputs": "Once",
        "parameters": {"max_new_tokens": 256},
        "stream": True,
    }
