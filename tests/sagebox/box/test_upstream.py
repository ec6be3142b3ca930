"""The gateway's HTTP/1.1 client against a scripted asyncio server: keep-alive, chunked bodies, stale connections,
refusals and timeouts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from sagebox.box.upstream import HttpUpstream, UpstreamTimeout, UpstreamUnavailable
from sagebox.local_server import free_port

Reply = Callable[[bytes], bytes | None]  # request body -> raw response bytes (None: hang up without answering)


def content_length(body: bytes, status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


def chunked(body: bytes) -> bytes:
    half = len(body) // 2
    parts = [body[:half], body[half:]]
    chunks = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks


class ScriptedServer:
    def __init__(self, reply: Reply, close_after_each: bool = False, answer: asyncio.Event | None = None) -> None:
        self.reply = reply
        self.close_after_each = close_after_each
        self.answer = answer  # when given, each reply waits for it (a server that has not answered yet)
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                request_line, *lines = head.decode("latin-1").split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines if line)
                body = await reader.readexactly(int(headers.get("Content-Length", "0")))
                self.requests.append((request_line, headers, body))
                if self.answer is not None:
                    await self.answer.wait()
                response = self.reply(body)
                if response is None:
                    return
                writer.write(response)
                await writer.drain()
                if self.close_after_each:
                    return
        finally:
            writer.close()

    async def drop_idle_connections(self) -> None:
        for writer in self.writers:
            writer.close()
            await writer.wait_closed()


@asynccontextmanager
async def serving(server: ScriptedServer) -> AsyncIterator[str]:
    port = free_port()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        listener.close()


def echo(body: bytes) -> bytes:
    return content_length(b'{"echo": "' + body + b'"}')


def test_keep_alive_reuses_one_connection_and_passes_headers() -> None:
    async def scenario() -> None:
        server = ScriptedServer(echo)
        client = HttpUpstream()
        async with serving(server) as url:
            first = await client.post(url, "/invocations", b"a", {"Content-Type": "application/json", "Accept": "x"})
            second = await client.post(url, "/invocations", b"bb", {"Content-Type": "application/json"})
        await client.aclose()
        assert (first.status_code, first.body) == (200, b'{"echo": "a"}')
        assert second.body == b'{"echo": "bb"}'
        assert first.headers["content-type"] == "application/json"
        assert server.connections == 1 and client.connections_opened == 1
        request_line, headers, _ = server.requests[0]
        assert request_line == "POST /invocations HTTP/1.1"
        assert headers["Accept"] == "x" and headers["Content-Length"] == "1"

    asyncio.run(scenario())


def test_chunked_responses_and_error_statuses_are_read_whole() -> None:
    async def scenario() -> None:
        bodies = iter([chunked(b'{"answer": "chunked body"}'), content_length(b'{"status": 500}', "500 Oops")])
        server = ScriptedServer(lambda _: next(bodies))
        client = HttpUpstream()
        async with serving(server) as url:
            ok = await client.post(url, "/invocations", b"{}", {})
            failed = await client.post(url, "/invocations", b"{}", {})
        await client.aclose()
        assert ok.body == b'{"answer": "chunked body"}'
        assert (failed.status_code, failed.body) == (500, b'{"status": 500}')

    asyncio.run(scenario())


def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    async def scenario() -> None:
        server = ScriptedServer(echo)
        client = HttpUpstream()
        async with serving(server) as url:
            await client.post(url, "/invocations", b"1", {})
            await server.drop_idle_connections()
            again = await client.post(url, "/invocations", b"2", {})
        await client.aclose()
        assert again.body == b'{"echo": "2"}'
        assert client.connections_opened == 2
        assert [body for _, _, body in server.requests] == [b"1", b"2"]  # nothing was sent twice

    asyncio.run(scenario())


def test_connection_close_responses_are_not_pooled() -> None:
    async def scenario() -> None:
        server = ScriptedServer(lambda body: content_length(body, extra="Connection: close\r\n"), close_after_each=True)
        client = HttpUpstream()
        async with serving(server) as url:
            for i in range(3):
                assert (await client.post(url, "/invocations", str(i).encode(), {})).body == str(i).encode()
        await client.aclose()
        assert client.connections_opened == 3

    asyncio.run(scenario())


def test_refused_and_hung_up_upstreams_are_unavailable() -> None:
    async def scenario() -> None:
        client = HttpUpstream(connect_timeout_s=1.0)
        with pytest.raises(UpstreamUnavailable, match="cannot connect"):
            await client.post(f"http://127.0.0.1:{free_port()}", "/invocations", b"{}", {})
        server = ScriptedServer(lambda _: None)  # reads the request, then closes without a word
        async with serving(server) as url:
            with pytest.raises(UpstreamUnavailable, match="before a complete response"):
                await client.post(url, "/invocations", b"{}", {})
        assert len(server.requests) == 1  # a fresh connection that failed is not retried
        await client.aclose()

    asyncio.run(scenario())


def test_a_slow_upstream_times_out() -> None:
    async def scenario() -> None:
        never = asyncio.Event()  # the upstream never answers: only the client's timeout can end the call
        server = ScriptedServer(echo, answer=never)
        client = HttpUpstream(timeout_s=0.2)
        async with serving(server) as url:
            with pytest.raises(UpstreamTimeout, match=r"within 0\.2 s"):
                await client.post(url, "/invocations", b"{}", {})
            never.set()
        await client.aclose()

    asyncio.run(scenario())


def test_only_plain_http_urls_are_accepted() -> None:
    from sagebox.box.upstream import UpstreamError

    with pytest.raises(UpstreamError, match="unsupported upstream URL"):
        asyncio.run(HttpUpstream().post("https://example.com", "/invocations", b"", {}))
