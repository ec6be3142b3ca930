"""A lean HTTP/1.1 client for the runtime gateway: keep-alive connections to serving processes, one request at a
time per connection, responses parsed by httptools (content-length or chunked).

The gateway sits on every local InvokeEndpoint call, so its cost shows in every latency the box reports: a
general-purpose async client (httpx) added ~1.2 ms per request on this machine, a pooled raw connection ~0.1 ms
(scripts/bench_serving.py, "gateway" section, measures the gateway's overhead).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

import httptools

MAX_IDLE_PER_HOST = 16
READ_CHUNK = 64 * 1024


class UpstreamError(RuntimeError):
    """The upstream could not be reached or broke the exchange."""


class UpstreamUnavailable(UpstreamError):
    """Connection refused, reset or closed before a response arrived."""

    def __init__(self, message: str, got_bytes: bool = False) -> None:
        super().__init__(message)
        self.got_bytes = got_bytes  # part of a response arrived: the server saw the request


class UpstreamTimeout(UpstreamError):
    """No complete response within the timeout."""


@dataclass
class UpstreamResponse:
    status_code: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    # post_stream's answers: the body's chunks as they arrive (`body` stays empty); UpstreamError if it breaks.
    stream: AsyncIterator[bytes] | None = None


class Upstream(Protocol):
    async def post(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse: ...

    async def post_stream(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse: ...

    async def aclose(self) -> None: ...


class _ResponseReader:
    """httptools callbacks collecting one response."""

    def __init__(self) -> None:
        self.response = UpstreamResponse(0)
        self.chunks: list[bytes] = []
        self.complete = False
        self.headers_complete = False
        self.keep_alive = True
        self.parser = httptools.HttpResponseParser(self)

    def on_header(self, name: bytes, value: bytes) -> None:
        self.response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.response.status_code = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_complete = True

    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        self.response.body = b"".join(self.chunks)
        self.complete = True


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.used = False  # a reused connection may have been closed by the server while idle

    def close(self) -> None:
        self.writer.close()


def _request(base_url: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[tuple[str, int], bytes]:
    """(host, port) and the bytes of a POST of `body` to `path` at `base_url` (http://host:port only)."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise UpstreamError(f"unsupported upstream URL {base_url!r}: http://host:port only")
    head = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "content-length")]
    return (parts.hostname, parts.port or 80), ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class HttpUpstream:
    """Pooled keep-alive connections per host:port. A pooled connection the server closed while it was idle fails
    before any byte of a response arrives; the request then goes out on another connection."""

    def __init__(self, timeout_s: float = 60.0, connect_timeout_s: float = 2.0) -> None:
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._idle: defaultdict[tuple[str, int], list[_Connection]] = defaultdict(list)
        self.connections_opened = 0

    async def post(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        key, request = _request(base_url, path, body, headers)
        try:
            return await asyncio.wait_for(self._exchange(key, request), self.timeout_s)
        except TimeoutError:
            raise UpstreamTimeout(f"no response from {base_url} within {self.timeout_s:g} s") from None

    async def _exchange(self, key: tuple[str, int], request: bytes) -> UpstreamResponse:
        while True:
            connection = self._idle[key].pop() if self._idle[key] else await self._connect(key)
            try:
                response, keep_alive = await self._send(connection, request)
            except UpstreamUnavailable as exc:
                connection.close()
                if connection.used and not exc.got_bytes:
                    continue  # a stale pooled connection: try the next one (or a fresh one)
                raise
            except BaseException:  # timeout or cancellation mid-exchange: the connection's state is unknown
                connection.close()
                raise
            if keep_alive and len(self._idle[key]) < MAX_IDLE_PER_HOST:
                connection.used = True
                self._idle[key].append(connection)
            else:
                connection.close()
            return response

    async def _connect(self, key: tuple[str, int]) -> _Connection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*key), self.connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise UpstreamUnavailable(f"cannot connect to {key[0]}:{key[1]}: {exc or type(exc).__name__}") from None
        self.connections_opened += 1
        return _Connection(reader, writer)

    async def _send(self, connection: _Connection, request: bytes) -> tuple[UpstreamResponse, bool]:
        collector = _ResponseReader()
        got_bytes = False
        try:
            connection.writer.write(request)
            await connection.writer.drain()
            while not collector.complete:
                data = await connection.reader.read(READ_CHUNK)
                if not data:
                    break
                got_bytes = True
                collector.parser.feed_data(data)
        except (OSError, httptools.HttpParserError) as exc:
            raise UpstreamUnavailable(f"upstream broke the exchange: {exc or type(exc).__name__}", got_bytes) from None
        if not collector.complete:
            raise UpstreamUnavailable("upstream closed the connection before a complete response", got_bytes)
        return collector.response, collector.keep_alive

    async def post_stream(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        """As `post`, but returned once the status and headers are in: `stream` yields the body's chunks as the
        server writes them (chunked encoding decoded), each within the timeout of the one before. The connection
        goes back to the pool only when the body ended cleanly."""
        key, request = _request(base_url, path, body, headers)
        while True:
            connection = self._idle[key].pop() if self._idle[key] else await self._connect(key)
            collector = _ResponseReader()
            try:
                connection.writer.write(request)
                await connection.writer.drain()
                await asyncio.wait_for(self._read_until(connection, collector, headers_only=True), self.timeout_s)
            except TimeoutError:
                connection.close()
                raise UpstreamTimeout(f"no response from {base_url} within {self.timeout_s:g} s") from None
            except UpstreamUnavailable as exc:
                connection.close()
                if connection.used and not exc.got_bytes:
                    continue
                raise
            except BaseException:
                connection.close()
                raise
            response = collector.response
            response.stream = self._body(key, connection, collector, base_url)
            return response

    async def _read_until(self, connection: _Connection, collector: _ResponseReader, headers_only: bool) -> bool:
        """Feed the parser until the headers (or the whole message) are in; whether any byte arrived."""
        got_bytes = False
        try:
            while not (collector.headers_complete if headers_only else collector.complete):
                data = await connection.reader.read(READ_CHUNK)
                if not data:
                    break
                got_bytes = True
                collector.parser.feed_data(data)
                if not headers_only:
                    return True  # one read's worth of body: the caller passes it on
        except (OSError, httptools.HttpParserError) as exc:
            raise UpstreamUnavailable(f"upstream broke the exchange: {exc or type(exc).__name__}", got_bytes) from None
        if not (collector.headers_complete if headers_only else collector.complete):
            raise UpstreamUnavailable("upstream closed the connection before a complete response", got_bytes)
        return got_bytes

    async def _body(
        self, key: tuple[str, int], connection: _Connection, collector: _ResponseReader, base_url: str
    ) -> AsyncIterator[bytes]:
        clean = False
        try:
            while True:
                if collector.chunks:
                    chunks, collector.chunks = collector.chunks, []
                    for chunk in chunks:
                        yield chunk
                if collector.complete:
                    clean = True
                    return
                try:
                    await asyncio.wait_for(self._read_until(connection, collector, headers_only=False), self.timeout_s)
                except TimeoutError:
                    raise UpstreamTimeout(f"{base_url} sent nothing for {self.timeout_s:g} s mid-answer") from None
        finally:
            if clean and collector.keep_alive and len(self._idle[key]) < MAX_IDLE_PER_HOST:
                connection.used = True
                self._idle[key].append(connection)
            else:
                connection.close()

    async def aclose(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
