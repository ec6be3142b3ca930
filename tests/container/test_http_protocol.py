"""The HTTP protocol's own refusal: a POST /invocations the app says cannot fit (its `refusal`, priced by the
Content-Length) is answered 503 with Retry-After as soon as its headers are parsed, without an ASGI cycle; its body
is dropped and the connection goes on to the next request, which the app answers."""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from container.http_protocol import JsonErrorHttpToolsProtocol


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8080) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class App:
    """An ASGI app that answers 200 and refuses bodies over 100 bytes through `refusal`."""

    def __init__(self) -> None:
        self.calls = 0
        self.asked: list[int] = []

    def refusal(self, body_bytes: int) -> tuple[bytes, int] | None:
        self.asked.append(body_bytes)
        return (b'{"message": "at capacity"}', 3) if body_bytes > 100 else None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def request(body: bytes, *headers: bytes) -> bytes:
    head = b"POST /invocations HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
    return head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def test_a_request_that_cannot_fit_is_refused_before_any_asgi_cycle_and_the_connection_goes_on() -> None:
    async def main() -> None:
        app = App()
        config = uvicorn.Config(app, proxy_headers=False, log_config=None)
        config.load()
        protocol = JsonErrorHttpToolsProtocol(config=config, server_state=ServerState(), app_state={})
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(request(b"x" * 500, b"X-Amzn-SageMaker-Custom-Attributes: trace=1"))
        refused = bytes(transport.written)
        assert refused.startswith(b"HTTP/1.1 503 ")
        assert b"retry-after: 3\r\n" in refused and b"x-amzn-sagemaker-custom-attributes: trace=1\r\n" in refused
        assert refused.endswith(b'{"message": "at capacity"}') and app.calls == 0 and not transport.closed
        transport.written.clear()
        protocol.data_received(request(b"y" * 10))  # the next request on the same connection reaches the app
        for _ in range(100):
            if transport.written:
                break
            await asyncio.sleep(0.01)
        assert bytes(transport.written).startswith(b"HTTP/1.1 200 ") and app.calls == 1
        assert app.asked == [500, 10]
        protocol.connection_lost(None)

    asyncio.run(main())
