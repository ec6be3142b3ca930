"""/invocations for a text-generation model: both payloads answered, streamed as server-sent events, bad requests
refused with a 400 reason while the server goes on serving, and a streamed answer sent as it is decoded."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import uvicorn
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from container.app import create_app
from container.env import MODEL_DIR, ServerSettings
from container.generation.service import GenerationService
from tests.container.generation.model_dir import character_tokenizer, reference_tokens, write_model_dir

T = TypeVar("T")
PROMPT = "Once upon a time"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("gen") / "model", "llama")


def _service(model_dir: Path, **env: str) -> GenerationService:
    settings = ServerSettings.from_env({MODEL_DIR: str(model_dir), "SAGEBOX_INTRA_OP_THREADS": "1", **env})
    return GenerationService(settings, drop_privileges=lambda user: None, memory=lambda: 1 << 30)


@asynccontextmanager
async def serving(service: GenerationService) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(service.settings, service)
    await service.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sagebox") as client:
        yield client
    await service.close()


def _events(text: str) -> list[Any]:
    assert text.endswith("\n\n")
    return [line.removeprefix("data: ") for line in text.split("\n\n") if line]


def _ids(text: str) -> list[int]:
    return list(character_tokenizer().encode(text).ids)


def test_a_prompt_is_answered_with_transformers_greedy_text(model_dir: Path) -> None:
    expected = character_tokenizer().decode(reference_tokens("llama", _ids(PROMPT), 12), skip_special_tokens=True)

    async def main() -> None:
        async with serving(_service(model_dir)) as client:
            ping = await client.get("/ping")
            assert ping.status_code == 200
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 12, "details": True}}
            response = await client.post("/invocations", json=body)
            assert response.status_code == 200, response.text
            [answer] = response.json()
            assert answer["generated_text"] == expected
            assert answer["details"]["finish_reason"] == "length" and answer["details"]["generated_tokens"] == 12
            full = await client.post(
                "/invocations", json={**body, "parameters": {"max_new_tokens": 12, "return_full_text": True}}
            )
            assert full.json()[0]["generated_text"] == PROMPT + expected
            stats = (await client.get("/stats")).json()
            assert stats["generation"]["tokens_out"] == 24 and stats["generation"]["running"] == 0

    run(main())


def test_tgi_streams_one_event_per_token_and_the_text_adds_up(model_dir: Path) -> None:
    async def main() -> None:
        async with serving(_service(model_dir)) as client:
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 16}}
            whole = (await client.post("/invocations", json=body)).json()[0]["generated_text"]
            response = await client.post("/invocations", json={**body, "stream": True})
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(e) for e in _events(response.text)]
            assert len(events) == 16 and [e["index"] for e in events] == list(range(16))
            assert all(e["generated_text"] is None and e["details"] is None for e in events[:-1])
            assert events[-1]["generated_text"] == whole == "".join(e["token"]["text"] for e in events)
            assert events[-1]["details"]["finish_reason"] == "length"
            assert events[-1]["details"]["input_length"] == len(_ids(PROMPT))

    run(main())


def test_the_messages_api_answers_and_streams_openai_shapes(model_dir: Path) -> None:
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi there"}], "max_tokens": 10, "seed": 7}

    async def main() -> None:
        async with serving(_service(model_dir)) as client:
            completion = ChatCompletion.model_validate((await client.post("/invocations", json=chat)).json())
            assert completion.object == "chat.completion" and completion.model == "tiny"
            assert completion.usage is not None and 1 <= completion.usage.completion_tokens <= 10
            reason = completion.choices[0].finish_reason
            assert reason == ("length" if completion.usage.completion_tokens == 10 else "stop")  # stop: EOS
            prompt = "<user>Hi there\n<assistant>"  # the model's chat template, rendered
            assert completion.usage.prompt_tokens == len(_ids(prompt))
            stream = {**chat, "stream": True, "stream_options": {"include_usage": True}}
            events = _events((await client.post("/invocations", json=stream)).text)
            assert events[-1] == "[DONE]"
            chunks = [ChatCompletionChunk.model_validate_json(e) for e in events[:-1]]
            assert chunks[0].choices[0].delta.role == "assistant"
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert text == completion.choices[0].message.content
            assert chunks[-2].choices[0].finish_reason == reason and chunks[-1].usage is not None

    run(main())


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"inputs": PROMPT, "parameters": {"max_new_tokens": -1}}, "'max_new_tokens' must be strictly positive"),
        ({"inputs": PROMPT, "parameters": {"max_new_tokens": 100_000}}, "at most"),
        ({"inputs": PROMPT, "parameters": {"top_p": 1.5}}, "'top_p'"),
        ({"inputs": ""}, "empty"),
        ({"inputs": "a" * 300}, "the prompt is 300 tokens"),
        ({"inputs": "a" * 250, "parameters": {"max_new_tokens": 10}}, "exceed MAX_TOTAL_TOKENS"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "role must be one of"),
        (b"\xff\xfe{", "not valid UTF-8"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_bad_generation_requests_are_400_and_the_server_goes_on(model_dir: Path, body: Any, fragment: str) -> None:
    async def main() -> None:
        async with serving(_service(model_dir, MAX_TOTAL_TOKENS="256")) as client:
            if isinstance(body, bytes):
                response = await client.post("/invocations", content=body, headers={"content-type": "application/json"})
            else:
                response = await client.post("/invocations", json=body)
            assert response.status_code == 400, response.text
            assert fragment in response.json()["message"] and "Traceback" not in response.text
            after = await client.post("/invocations", json={"inputs": PROMPT, "parameters": {"max_new_tokens": 2}})
            assert after.status_code == 200

    run(main())


def test_a_model_without_a_chat_template_refuses_messages(tmp_path: Path) -> None:
    plain = write_model_dir(tmp_path / "plain", "gpt2", chat=False)

    async def main() -> None:
        async with serving(_service(plain)) as client:
            response = await client.post("/invocations", json={"messages": [{"role": "user", "content": "x"}]})
            assert response.status_code == 400 and "no chat template" in response.json()["message"]
            assert (
                await client.post("/invocations", json={"inputs": "x", "parameters": {"max_new_tokens": 3}})
            ).status_code == 200

    run(main())


def test_beyond_max_concurrent_requests_is_503_with_retry_after(model_dir: Path) -> None:
    async def main() -> None:
        service = _service(model_dir, MAX_CONCURRENT_REQUESTS="1", MAX_BATCH_TOTAL_TOKENS="256", MAX_TOTAL_TOKENS="256")
        async with serving(service) as client:
            assert service.engine is not None
            gate = threading.Event()
            forward = service.engine.decoder.forward
            service.engine.decoder.forward = lambda *a, **k: (gate.wait(30), forward(*a, **k))[1]  # type: ignore[method-assign]
            first = asyncio.create_task(
                client.post("/invocations", json={"inputs": PROMPT, "parameters": {"max_new_tokens": 3}})
            )
            while service.engine.load == 0:
                await asyncio.sleep(0.01)
            refused = await client.post("/invocations", json={"inputs": PROMPT})
            assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
            assert "retry later" in refused.json()["message"]
            gate.set()
            assert (await first).status_code == 200

    run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_streamed_answer_is_sent_as_decoded_and_a_client_that_leaves_frees_its_slot(model_dir: Path) -> None:
    """Over a real socket: the first event arrives while the engine is held before its second step, so nothing
    buffers the stream; closing the connection mid-stream cancels the generation."""
    service = _service(model_dir)
    run(service.start())
    assert service.engine is not None
    gate = threading.Event()
    forward = service.engine.decoder.forward
    steps = {"n": 0}

    def held(*args: Any, **kwargs: Any) -> Any:
        steps["n"] += 1
        if steps["n"] >= 2:
            gate.wait(30)
        return forward(*args, **kwargs)

    service.engine.decoder.forward = held  # type: ignore[method-assign]
    port = _free_port()
    config = uvicorn.Config(
        create_app(service.settings, service), host="127.0.0.1", port=port, log_config=None, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(300):
                try:
                    client.get("/ping")
                    break
                except httpx.ConnectError:
                    threading.Event().wait(0.01)
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 50}, "stream": True}
            with client.stream("POST", "/invocations", json=body) as response:
                lines = response.iter_lines()
                first = next(line for line in lines if line)
                assert json.loads(first.removeprefix("data: "))["index"] == 0
                # Every step after the first waits for the gate: one token exists, the other 49 cannot yet.
                assert not gate.is_set() and service.engine.tokens_out == 1
            gate.set()  # the client left after one event: the engine drops the sequence at its next step
            for _ in range(500):
                if service.engine.load == 0:
                    break
                threading.Event().wait(0.01)
            assert service.engine.load == 0 and service.abandoned == 1
            assert service.engine.tokens_out < 50
    finally:
        gate.set()
        server.should_exit = True
        thread.join(10)
        run(service.close())
