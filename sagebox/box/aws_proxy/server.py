"""The AWS proxy process: an HTTP proxy on 127.0.0.1 that `sagebox env` names in HTTPS_PROXY/HTTP_PROXY.

    python -m sagebox.box.aws_proxy.server --fd N --state-dir DIR --aws URL --gateway URL [--upstream URL]

(`--fd`: the listening socket on 127.0.0.1 it inherits from `sagebox up`, which bound it.)

- `CONNECT <aws hostname>:443`: answered 200, then TLS is terminated with a certificate of the box's CA for that
  hostname, and the decrypted HTTP goes, unchanged (its Host header included), to the embedded AWS or, for SageMaker's
  runtime, to the runtime gateway. Nothing of it leaves the machine, and the hostname is never resolved.
- `CONNECT <any other host>`: tunnelled as any proxy would, straight to that host (or through `--upstream`, the proxy
  the shell had before), bytes untouched: the client's own TLS runs end to end, exactly as without the box.
- A plain-HTTP request in absolute form (`GET http://host/path`): sent to the box for AWS hostnames, to the host (or
  the upstream proxy) otherwise; one request per connection (`Connection: close`).

Every connection is one line of the log: who asked for which host, and where it went.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import socket
import sys
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from sagebox.box.aws_proxy.routing import Route, route, split_authority
from sagebox.box.aws_proxy.trust import ProxyTrust

log = logging.getLogger("sagebox.aws_proxy")

HEAD_LIMIT = 64 * 1024  # a request head longer than this is refused (431)
CONNECT_TIMEOUT_S = 30.0


class ProxyError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class Targets:
    aws: tuple[str, int]  # the embedded AWS (moto server), plain HTTP on loopback
    gateway: tuple[str, int]  # the runtime gateway
    upstream: tuple[str, int] | None = None  # the proxy passed-through traffic takes; None: direct

    def of(self, where: Route) -> tuple[str, int]:
        return self.gateway if where is Route.RUNTIME_GATEWAY else self.aws


def _address(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url if "//" in url else f"http://{url}")
    if not parsed.hostname:
        raise ValueError(f"not a URL: {url!r}")
    host = "127.0.0.1" if parsed.hostname == "localhost" else parsed.hostname  # the box listens on IPv4 loopback
    return host, parsed.port or (443 if parsed.scheme == "https" else 80)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half-close: the other side may still answer
        else:
            writer.close()
    except (ConnectionError, OSError):
        writer.close()


async def _splice(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Bytes both ways until both directions end."""
    try:
        await asyncio.gather(_pipe(client[0], upstream[1]), _pipe(upstream[0], client[1]))
    finally:
        for writer in (client[1], upstream[1]):
            writer.close()


def _headers_without_hop_by_hop(lines: list[str]) -> list[str]:
    hop = {"connection", "proxy-connection", "keep-alive", "proxy-authorization", "te", "trailer", "upgrade"}
    return [line for line in lines if line.split(":", 1)[0].strip().lower() not in hop]


class AwsProxy:
    def __init__(self, targets: Targets, trust: ProxyTrust) -> None:
        self.targets = targets
        self.trust = trust
        self.connections: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        """End every open connection (the listening socket is closed first)."""
        for task in list(self.connections):
            task.cancel()
        await asyncio.gather(*self.connections, return_exceptions=True)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.connections.add(task)
            task.add_done_callback(self.connections.discard)
        peer = writer.get_extra_info("peername")
        try:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                raise ProxyError(431, "request head too long") from None
            except asyncio.IncompleteReadError:
                return  # closed before asking anything
            request_line, *headers = head.decode("latin-1").split("\r\n")[:-2]
            method, target, _ = ([*request_line.split(" ", 2), "", ""])[:3]
            if method.upper() == "CONNECT":
                await self._connect(target, head, reader, writer, peer)
            elif target.startswith("http://"):
                await self._forward(method, target, headers, reader, writer, peer)
            else:
                raise ProxyError(400, "this is a proxy: send CONNECT host:port or an absolute http:// URL")
        except ProxyError as exc:
            log.info("%s refused: %s %s", peer, exc.status, exc.reason)
            with contextlib.suppress(ConnectionError, OSError):
                body = f"{exc.reason}\n".encode()
                writer.write(
                    f"HTTP/1.1 {exc.status} {exc.reason}\r\nContent-Type: text/plain\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.info("%s connection ended: %s", peer, exc)
        except asyncio.CancelledError:  # the proxy is stopping (close()): end quietly, the task is done
            pass
        finally:
            writer.close()

    async def _open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            return await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError) as exc:
            raise ProxyError(502, f"cannot reach {host}:{port}: {exc}") from None

    async def _connect(
        self,
        authority: str,
        head: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: object,
    ) -> None:
        try:
            host, port = split_authority(authority, 443)
        except ValueError as exc:
            raise ProxyError(400, str(exc)) from None
        where = route(host)
        if where is Route.PASS_THROUGH:
            upstream = self.targets.upstream
            log.info("%s CONNECT %s:%d -> %s%s", peer, host, port, where.value, " via upstream proxy" * bool(upstream))
            if upstream:  # the upstream proxy answers the CONNECT itself
                remote = await self._open(*upstream)
                remote[1].write(head)
            else:
                remote = await self._open(host, port)
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await _splice((reader, writer), remote)
            return
        target = self.targets.of(where)
        log.info("%s CONNECT %s:%d -> %s (%s:%d)", peer, host, port, where.value, *target)
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        await writer.start_tls(self.trust.context_for(host.lower().rstrip(".")))
        await _splice((reader, writer), await self._open(*target))

    async def _forward(
        self,
        method: str,
        url: str,
        headers: list[str],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        peer: object,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        try:
            host, port = split_authority(parsed.netloc.rpartition("@")[2], 80)
        except ValueError as exc:
            raise ProxyError(400, str(exc)) from None
        where = route(host)
        kept = _headers_without_hop_by_hop(headers)
        if where is Route.PASS_THROUGH and self.targets.upstream:
            log.info("%s %s %s -> %s via upstream proxy", peer, method, url, where.value)
            remote = await self._open(*self.targets.upstream)
            first = f"{method} {url} HTTP/1.1"
        else:
            target = (host, port) if where is Route.PASS_THROUGH else self.targets.of(where)
            log.info("%s %s %s -> %s (%s:%d)", peer, method, url, where.value, *target)
            remote = await self._open(*target)
            first = f"{method} {urllib.parse.urlunsplit(('', '', parsed.path or '/', parsed.query, ''))} HTTP/1.1"
        remote[1].write(("\r\n".join([first, *kept, "Connection: close", "", ""])).encode("latin-1"))
        await _splice((reader, writer), remote)


async def run(proxy: AwsProxy, sock: socket.socket, stop: asyncio.Event) -> None:
    server = await asyncio.start_server(proxy.handle, sock=sock, limit=HEAD_LIMIT)
    log.info(
        "AWS proxy on http://127.0.0.1:%d: AWS hostnames -> the box, every other host passed through",
        sock.getsockname()[1],
    )
    async with server:
        await stop.wait()
        server.close()
        await proxy.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Sagebox's AWS proxy: AWS hostnames reach the box")
    parser.add_argument("--fd", type=int, required=True, help="the inherited listening socket")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--aws", required=True, help="the embedded AWS's URL")
    parser.add_argument("--gateway", required=True, help="the runtime gateway's URL")
    parser.add_argument("--upstream", default="", help="the proxy passed-through traffic takes (default: direct)")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stdout)
    trust = ProxyTrust(args.state_dir / "aws-proxy")
    trust.prepare()
    targets = Targets(_address(args.aws), _address(args.gateway), _address(args.upstream) if args.upstream else None)
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        loop.run_until_complete(run(AwsProxy(targets, trust), socket.socket(fileno=args.fd), stop))
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
