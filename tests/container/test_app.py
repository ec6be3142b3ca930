"""The HTTP layer in-process (ASGI, no sockets): statuses and bodies for every refusal, the deadline (504) on an
injected clock, overload (503), a client that disconnects, and the in-flight count the SIGTERM report reads."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Coroutine, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import pytest

from container.app import InFlight, RefuseUnread, create_app
from container.manifest import ManifestError
from container.predictor import CallObserver, Predictor
from container.server import SigtermReport
from container.service import REFUSED_REASON, InferenceService
from tests.container.fakes import FixedCost, GateHandler, ManualClock, make_service, settings, wait_for

T = TypeVar("T")
CONTEXT = "The Amazon rainforest covers much of the Amazon basin of South America."
QUESTION = {"question": "Which basin does the rainforest cover?", "context": CONTEXT}
LONG = {"question": "Which word?", "context": " ".join(f"word{i}" for i in range(200))}  # two model calls


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@asynccontextmanager
async def serving(
    service: InferenceService, start: bool = True
) -> AsyncIterator[tuple[httpx.AsyncClient, RefuseUnread]]:
    app = create_app(service.settings, service)
    if start:
        await service.start()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sagebox") as client:
        yield client, app
    await service.close()


def assert_error(response: httpx.Response, status: int, fragment: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status and fragment in body["message"]
    assert "Traceback" not in response.text
    return body


def test_ping_and_invocations_while_loading_then_ready() -> None:
    handler = GateHandler()

    async def main() -> None:
        async with serving(make_service(handler), start=False) as (client, app):
            ping = await client.get("/ping")
            assert ping.status_code == 503 and ping.json() == {"status": "loading", "message": "model is loading"}
            loading = await client.post("/invocations", json=QUESTION)
            assert_error(loading, 503, "loading")
            assert loading.headers["retry-after"] == "1"
            await app.state.service.start()
            ready = (await client.get("/ping")).json()
            # Which build serves, on which CPU kind, and why (container/cpu_kind.py).
            assert ready["status"] == "ready" and set(ready) == {"status", "runtime", "cpu_kind", "reason"}
            assert ready["runtime"] == app.state.service._predictor.manifest.runtime
            answer = (await client.post("/invocations", json=QUESTION)).json()
            assert CONTEXT[answer["start"] : answer["end"]] == answer["answer"]

    run(main())


def test_a_failed_load_shows_clients_no_paths_or_library_messages() -> None:
    def refuse(on_call: CallObserver) -> Predictor:
        raise ManifestError("model is incomplete: tokenizer.json missing from /opt/ml/model")

    service = InferenceService(settings(), loader=refuse, drop_privileges=lambda user: None)

    async def main() -> None:
        async with serving(service) as (client, _):
            ping = await client.get("/ping")
            assert ping.status_code == 503
            assert ping.json() == {"status": "failed", "message": REFUSED_REASON}
            refused = await client.post("/invocations", json=QUESTION)
            body = assert_error(refused, 503, REFUSED_REASON)
            assert "retry-after" not in refused.headers  # a model that did not load: retrying cannot help
            for response_text in (ping.text, json.dumps(body)):
                assert "tokenizer.json" not in response_text and "/opt/ml" not in response_text

    run(main())


def test_past_the_timeout_is_504_on_the_injected_clock() -> None:
    handler = GateHandler()
    clock = ManualClock()

    async def main() -> None:
        async with serving(make_service(handler, clock=clock, SAGEMAKER_MODEL_SERVER_TIMEOUT="7")) as (client, _):
            handler.open.clear()
            handler.entered.clear()
            pending = asyncio.create_task(client.post("/invocations", json=QUESTION))
            await wait_for(handler.entered)
            clock.advance(6.9)
            await asyncio.sleep(0)
            assert not pending.done()
            clock.advance(0.1)
            assert_error(await pending, 504, "longer than 7s")
            handler.open.set()
            assert (await client.post("/invocations", json=QUESTION)).status_code == 200

    run(main())


def test_overload_is_503_at_once_with_a_short_reason() -> None:
    handler = GateHandler()
    service = make_service(handler, cost=FixedCost(6.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        async with serving(service) as (client, _):
            handler.open.clear()
            handler.entered.clear()
            first = asyncio.create_task(client.post("/invocations", json=QUESTION))
            await wait_for(handler.entered)
            refused = await client.post("/invocations", json=QUESTION)  # the gate is still closed
            body = assert_error(refused, 503, "at capacity")
            assert body["error"] == "Service Unavailable" and len(body["message"]) < 200
            assert refused.headers["retry-after"] == "5"  # 6 s queued + 6 s needed - 3/4 of a fresh 10 s timeout
            handler.open.set()
            assert (await first).status_code == 200

    run(main())


def test_a_request_bigger_than_the_timeout_is_413() -> None:
    handler = GateHandler()
    service = make_service(handler, cost=FixedCost(30.0), SAGEMAKER_MODEL_SERVER_TIMEOUT="10")

    async def main() -> None:
        async with serving(service) as (client, _):
            assert_error(await client.post("/invocations", json=QUESTION), 413, "split the request")

    run(main())


def test_a_model_failure_is_500_without_details() -> None:
    handler = GateHandler()

    async def main() -> None:
        async with serving(make_service(handler)) as (client, _):
            handler.fail = True
            response = await client.post("/invocations", json=QUESTION)
            assert_error(response, 500, "internal error")
            assert "gate handler" not in response.text
            handler.fail = False
            assert (await client.post("/invocations", json=QUESTION)).status_code == 200

    run(main())


class Connection:
    """One ASGI request driven by hand: the body, then `http.disconnect` when the test calls `leave()`."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent: list[dict[str, Any]] = []
        self._left = asyncio.Event()
        self._body_sent = False

    def leave(self) -> None:
        self._left.set()

    async def receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(dict(message))

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/invocations",
            "raw_path": b"/invocations",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8080),
        }


def test_a_client_that_disconnects_costs_no_further_model_calls() -> None:
    handler = GateHandler()
    service = make_service(handler)

    async def main() -> None:
        async with serving(service) as (client, app):
            handler.open.clear()
            handler.entered.clear()
            handler.calls.clear()
            connection = Connection(json.dumps(LONG).encode())
            request = asyncio.create_task(app(connection.scope(), connection.receive, connection.send))
            await wait_for(handler.entered)  # window 1 of 2 is in the model
            connection.leave()
            await request
            handler.open.set()
            # The next request runs after the abandoned batch is over.
            assert (await client.post("/invocations", json=QUESTION)).status_code == 200
            assert len(handler.calls) == 2  # window 1 of the abandoned request, and the next request
            assert connection.sent[0]["status"] == 400
            stats = (await client.get("/stats")).json()
            assert stats["admission"]["abandoned"] == 1 and stats["admission"]["dropped_features"] == 1
            assert stats["in_flight"] == 0

    run(main())


def test_in_flight_counts_what_the_drain_deadline_cut_off() -> None:
    handler = GateHandler()
    in_flight = InFlight()

    async def main() -> None:
        service = make_service(handler)
        app = create_app(service.settings, service, in_flight)
        await service.start()
        handler.open.clear()
        handler.entered.clear()
        connection = Connection(json.dumps(QUESTION).encode())
        request = asyncio.create_task(app(connection.scope(), connection.receive, connection.send))
        await wait_for(handler.entered)
        assert (in_flight.active, in_flight.cut_off) == (1, 1)  # SIGTERM now would cut this one off
        request.cancel()  # what uvicorn does at the drain deadline
        with pytest.raises(asyncio.CancelledError):
            await request
        assert (in_flight.active, in_flight.cancelled, in_flight.cut_off) == (0, 1, 1)
        handler.open.set()
        await service.close()

    run(main())


def test_sigterm_report_says_drained_only_when_nothing_was_cut(caplog: pytest.LogCaptureFixture) -> None:
    in_flight = InFlight()
    report = SigtermReport(in_flight, drain_seconds=25)
    with caplog.at_level(logging.INFO, logger="sagebox.server"):
        report(15, None)
        in_flight.cancelled = 2
        report(15, None)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "drained after SIGTERM; exiting",
        "SIGTERM: 2 in-flight request(s) cut off at the 25s drain deadline; exiting",
    ]
