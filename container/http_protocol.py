"""uvicorn's httptools protocol with one change: a request it cannot parse (a negative or non-numeric
Content-Length, a malformed request line or header, a bad chunk) is answered with this server's JSON error body,
like every other 4xx, instead of uvicorn's text/plain "Invalid HTTP request received.".

It overrides `send_400_response` of uvicorn 0.54's HttpToolsProtocol (uvicorn and httptools are pinned;
tests/container/test_server.py sends such requests to a real server).

And a second: a POST /invocations that the app's admission control would refuse unread (container/app.py,
`RefuseUnread`, priced by its Content-Length) is answered 503 by the protocol itself, as soon as its headers are
parsed: no ASGI cycle, task or scope for it, its body dropped as it arrives. Under a retry storm refusals are nearly
all the traffic, so their cost is the CPU the model loses (measured: docs/serving.md, Admission control). Only a
connection with no earlier request still being answered takes this path (pipelined answers keep their order).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from container.payload import error_body


class Refuser(Protocol):
    def refusal(self, body_bytes: int) -> tuple[bytes, int] | None:
        """(JSON body, Retry-After seconds) of the 503 for a request of `body_bytes` arriving now, or None."""
        ...


def length_and_attributes(headers: Iterable[tuple[bytes, bytes]]) -> tuple[int | None, bytes | None]:
    """(Content-Length, X-Amzn-SageMaker-Custom-Attributes) of lower-cased raw headers; None where absent or, for the
    length, not a number."""
    length: int | None = None
    echo: bytes | None = None
    for name, value in headers:
        if name == b"content-length":
            length = int(value) if value.isdigit() else None
        elif name == b"x-amzn-sagemaker-custom-attributes":
            echo = value
    return length, echo


def _refuser(app: object) -> Refuser | None:
    """The app's RefuseUnread, under whatever uvicorn wrapped it in (ProxyHeadersMiddleware, ...)."""
    for _ in range(8):
        if callable(getattr(app, "refusal", None)):
            return app  # type: ignore[return-value]  # it has the method the protocol calls
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None


class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
    _refused: bool = False
    _refuser_found: bool = False
    _refuser_cache: Refuser | None = None

    def on_headers_complete(self) -> None:
        response = self._refusal_response()
        if response is None:
            super().on_headers_complete()
            return
        self._refused = True
        self.transport.write(response)

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()
            return
        self._refused = False
        if not self.parser.should_keep_alive():
            self.transport.close()
        self.on_response_complete()

    def _refusal_response(self) -> bytes | None:
        if self.url != b"/invocations" or self.parser.get_method() != b"POST" or self.pipeline:
            return None
        if self.cycle is not None and not self.cycle.response_complete:
            return None
        if not self._refuser_found:
            self._refuser_cache, self._refuser_found = _refuser(self.app), True
        refuser = self._refuser_cache
        if refuser is None:
            return None
        length, echo = length_and_attributes(self.headers)
        refused = None if length is None else refuser.refusal(length)
        if refused is None:
            return None
        body, retry_after = refused
        extra = [(b"retry-after", str(retry_after).encode("ascii"))]
        if echo is not None:
            extra.append((b"x-amzn-sagemaker-custom-attributes", echo))
        return self._json_response(503, body, extra, close=not self.parser.should_keep_alive())

    def _json_response(self, status: int, body: bytes, extra: list[tuple[bytes, bytes]], close: bool) -> bytes:
        """A whole JSON response as uvicorn writes one: its status line and default headers (server, date)."""
        content = [STATUS_LINE[status]]
        for name, value in [*self.server_state.default_headers, *extra]:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [b"content-type: application/json\r\n", b"content-length: " + str(len(body)).encode("ascii") + b"\r\n"]
        )
        if close:
            content.append(b"connection: close\r\n")
        content.extend([b"\r\n", body])
        return b"".join(content)

    def send_400_response(self, msg: str) -> None:
        body = error_body(400, f"malformed HTTP request: {msg.rstrip('.')}")
        self.transport.write(self._json_response(400, body, [], close=True))
        self.transport.close()
