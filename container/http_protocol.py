"""uvicorn's httptools protocol with one change: a request it cannot parse (a negative or non-numeric
Content-Length, a malformed request line or header, a bad chunk) is answered with this server's JSON error body,
like every other 4xx, instead of uvicorn's text/plain "Invalid HTTP request received.".

It overrides `send_400_response` of uvicorn 0.54's HttpToolsProtocol (uvicorn and httptools are pinned;
tests/container/test_server.py sends such requests to a real server).
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from container.payload import error_body


class JsonErrorHttpToolsProtocol(HttpToolsProtocol):
    def send_400_response(self, msg: str) -> None:
        body = error_body(400, f"malformed HTTP request: {msg.rstrip('.')}")
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
                b"connection: close\r\n",
                b"\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        self.transport.close()
