"""The AWS proxy: which hostnames the box answers, the name-constrained CA, and the proxy process itself against
stand-in upstreams (real sockets, real TLS, the real process): AWS hostnames reach the box with their Host header,
every other host is tunnelled untouched, directly or through the shell's own proxy."""

from __future__ import annotations

import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from sagebox.box.aws_proxy import RunningProxy
from sagebox.box.aws_proxy.routing import (
    Route,
    is_aws_hostname,
    no_proxy,
    route,
    split_authority,
    upstream_proxy,
)
from sagebox.box.aws_proxy.trust import ProxyTrust
from sagebox.box.certificates import key_pem, new_leaf_key


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("sts.us-east-1.amazonaws.com", Route.EMBEDDED_AWS),
        ("STS.US-EAST-1.AMAZONAWS.COM.", Route.EMBEDDED_AWS),
        ("my-bucket.s3.amazonaws.com", Route.EMBEDDED_AWS),
        ("s3.dualstack.eu-west-1.amazonaws.com", Route.EMBEDDED_AWS),
        ("sagemaker.cn-north-1.amazonaws.com.cn", Route.EMBEDDED_AWS),
        ("s3.us-east-1.api.aws", Route.EMBEDDED_AWS),
        ("runtime.sagemaker.us-east-1.amazonaws.com", Route.RUNTIME_GATEWAY),
        ("runtime-fips.sagemaker.us-gov-west-1.amazonaws.com", Route.RUNTIME_GATEWAY),
        ("pypi.org", Route.PASS_THROUGH),
        ("amazonaws.com.evil.example", Route.PASS_THROUGH),
        ("notamazonaws.com", Route.PASS_THROUGH),
        ("127.0.0.1", Route.PASS_THROUGH),
        ("x_y.amazonaws.com", Route.PASS_THROUGH),  # not a DNS name: no certificate is ever made for it
    ],
)
def test_only_aws_hostnames_are_the_boxs(host: str, expected: Route) -> None:
    assert route(host) is expected
    assert is_aws_hostname(host) == (expected is not Route.PASS_THROUGH)


def test_authorities_split_as_connect_and_urls_give_them() -> None:
    assert split_authority("sts.us-east-1.amazonaws.com:443", 443) == ("sts.us-east-1.amazonaws.com", 443)
    assert split_authority("example.com", 80) == ("example.com", 80)
    assert split_authority("[::1]:8443", 443) == ("::1", 8443)
    for bad in ("", ":443", "a/b:443", "host:http", "host:70000", "user@host:443"):
        with pytest.raises(ValueError):
            split_authority(bad, 443)


def test_the_shells_own_proxy_stays_the_way_out_and_a_boxs_is_never_chained() -> None:
    assert upstream_proxy({}) == ""
    assert upstream_proxy({"https_proxy": "http://corp:3128"}) == "http://corp:3128"
    # After `eval "$(sagebox env)"` the shell names the box's proxy, and the one it had before in the marker.
    after = {"HTTPS_PROXY": "http://127.0.0.1:4000", "SAGEBOX_AWS_PROXY": "http://127.0.0.1:4000"}
    assert upstream_proxy(after) == ""
    assert upstream_proxy({**after, "SAGEBOX_UPSTREAM_PROXY": "http://corp:3128"}) == "http://corp:3128"
    assert no_proxy({"NO_PROXY": "internal.example, localhost"}) == "localhost,127.0.0.1,::1,internal.example"


def _handshake(server_context: ssl.SSLContext, bundle: Path, hostname: str) -> None:
    """A TLS handshake over a socket pair: the client verifies `hostname` against `bundle`."""
    left, right = socket.socketpair()
    client_context = ssl.create_default_context(cafile=str(bundle))
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            with server_context.wrap_socket(right, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as exc:
            failure.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_context.wrap_socket(left, server_hostname=hostname) as tls:
            tls.sendall(b"x")
    finally:
        thread.join(5)


def test_the_bundle_trusts_the_box_for_aws_hostnames_and_the_ca_can_vouch_for_nothing_else(tmp_path: Path) -> None:
    trust = ProxyTrust(tmp_path / "aws-proxy")
    bundle = trust.prepare()
    assert trust.ca_key.stat().st_mode & 0o777 == 0o600
    _handshake(trust.context_for("sts.us-east-1.amazonaws.com"), bundle, "sts.us-east-1.amazonaws.com")
    # The same CA signing a certificate for another domain (as a stolen key would): refused by the name constraints.
    assert trust._authority is not None
    key = new_leaf_key()
    forged = tmp_path / "forged.pem"
    forged.write_bytes(trust._authority.issue("pypi.org", key) + trust._authority.cert_pem)
    (tmp_path / "forged-key.pem").write_bytes(key_pem(key))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(forged, tmp_path / "forged-key.pem")
    with pytest.raises(ssl.SSLCertVerificationError, match=r"permitted subtree violation|name constraint"):
        _handshake(context, bundle, "pypi.org")
    # The machine's own CAs are in the bundle too: every other host verifies as before.
    from sagebox.box.aws_proxy.trust import system_bundle

    assert bundle.read_bytes().startswith(system_bundle().read_bytes().rstrip(b"\n"))


def test_the_ca_is_kept_across_starts_and_the_bundle_rewritten(tmp_path: Path) -> None:
    first = ProxyTrust(tmp_path)
    first.prepare()
    ca = first.ca_cert.read_bytes()
    first.bundle.write_bytes(b"stale")
    ProxyTrust(tmp_path).prepare()
    assert first.ca_cert.read_bytes() == ca and first.bundle.read_bytes().endswith(ca)


# --- the proxy process against stand-in upstreams -----------------------------------------------------------------


class Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with who it is, the Host header and the path it got."""

    name = "?"

    def do_GET(self) -> None:
        body = f"{self.name} host={self.headers['Host']} path={self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


def echo_server(name: str) -> http.server.ThreadingHTTPServer:
    handler = type(f"Echo{name}", (Echo,), {"name": name})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class RecordingProxy(http.server.BaseHTTPRequestHandler):
    """A stand-in for a shell's own HTTP proxy: records what it is asked, answers CONNECT by tunnelling."""

    protocol_version = "HTTP/1.1"
    asked: ClassVar[list[str]] = []

    def do_CONNECT(self) -> None:
        self.asked.append(f"CONNECT {self.path}")
        host, port = self.path.rsplit(":", 1)
        remote = socket.create_connection((host, int(port)))
        self.send_response(200)
        self.end_headers()
        self.connection.settimeout(5)
        remote.settimeout(5)
        remote.sendall(self.connection.recv(65536))  # one request, `Connection: close`: answered until EOF
        while chunk := remote.recv(65536):
            self.connection.sendall(chunk)
        remote.close()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstreams() -> Iterator[dict[str, http.server.ThreadingHTTPServer]]:
    servers = {name: echo_server(name) for name in ("aws", "gateway", "elsewhere")}
    yield servers
    for server in servers.values():
        server.shutdown()


@contextlib.contextmanager
def started(
    tmp_path: Path, servers: dict[str, http.server.ThreadingHTTPServer], env: dict[str, str]
) -> Iterator[RunningProxy]:
    """The proxy process (as `sagebox up` starts it) in front of the stand-ins; stopped afterwards."""
    from sagebox.box import aws_proxy, processes

    aws = f"http://localhost:{servers['aws'].server_address[1]}"
    gateway = f"http://localhost:{servers['gateway'].server_address[1]}"
    running = aws_proxy.start(tmp_path, aws, gateway, env)
    try:
        yield running
    finally:
        processes.stop(running.pid)


def port_of(proxy: RunningProxy) -> int:
    return int(proxy.url.rsplit(":", 1)[1])


def through(proxy: RunningProxy, authority: str, request: bytes, tls_host: str | None = None) -> bytes:
    """CONNECT `authority` through the proxy, then send `request` (over TLS to `tls_host` when given)."""
    sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=10)
    sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    conn: socket.socket = sock
    if tls_host:
        conn = ssl.create_default_context(cafile=str(proxy.bundle)).wrap_socket(sock, server_hostname=tls_host)
    conn.sendall(request)
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    conn.close()
    return answer


def get(host: str, path: str = "/") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()


def test_aws_hostnames_reach_the_box_over_tls_it_trusts_and_other_hosts_pass_untouched(
    tmp_path: Path, upstreams: dict[str, http.server.ThreadingHTTPServer]
) -> None:
    with started(tmp_path, upstreams, {}) as proxy:
        sts = "sts.us-east-1.amazonaws.com"
        answer = through(proxy, f"{sts}:443", get(sts, "/?Action=GetCallerIdentity"), tls_host=sts)
        assert answer.endswith(f"aws host={sts} path=/?Action=GetCallerIdentity".encode())
        runtime = "runtime.sagemaker.us-east-1.amazonaws.com"
        answer = through(proxy, f"{runtime}:443", get(runtime, "/endpoints/e/invocations"), tls_host=runtime)
        assert answer.endswith(f"gateway host={runtime} path=/endpoints/e/invocations".encode())
        # Another host: a plain tunnel to it, whatever the bytes (here plain HTTP to the stand-in).
        elsewhere = f"127.0.0.1:{upstreams['elsewhere'].server_address[1]}"
        assert through(proxy, elsewhere, get(elsewhere, "/x")).endswith(f"elsewhere host={elsewhere} path=/x".encode())
        # Plain HTTP in absolute form: an AWS hostname goes to the box, with the request line in origin form.
        sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=10)
        sock.sendall(b"GET http://s3.amazonaws.com/bucket/key HTTP/1.1\r\nHost: s3.amazonaws.com\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.endswith(b"aws host=s3.amazonaws.com path=/bucket/key")
    logged = proxy.log.read_text()
    assert f"CONNECT {sts}:443 -> embedded AWS" in logged
    assert f"CONNECT {runtime}:443 -> runtime gateway" in logged
    assert f"CONNECT {elsewhere} -> passed through (not an AWS hostname)" in logged


def test_bad_requests_get_a_proxy_error_and_the_proxy_serves_on(
    tmp_path: Path, upstreams: dict[str, http.server.ThreadingHTTPServer]
) -> None:
    with started(tmp_path, upstreams, {}) as proxy:
        for request, status in (
            (b"GET /not-a-proxy-request HTTP/1.1\r\n\r\n", b"400"),
            (b"CONNECT nohost:port HTTP/1.1\r\n\r\n", b"400"),
            (b"CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", b"502"),  # nothing listens there
            (b"GET http://x/ HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n", b"431"),
        ):
            sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=10)
            sock.sendall(request)
            assert sock.recv(12).split()[1] == status
            sock.close()
        sts = "sts.us-east-1.amazonaws.com"
        assert through(proxy, f"{sts}:443", get(sts), tls_host=sts).endswith(f"aws host={sts} path=/".encode())


def test_other_hosts_go_through_the_shells_own_proxy_when_it_had_one(
    tmp_path: Path, upstreams: dict[str, http.server.ThreadingHTTPServer]
) -> None:
    RecordingProxy.asked = []
    corporate = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RecordingProxy)
    threading.Thread(target=corporate.serve_forever, daemon=True).start()
    shell = {"HTTPS_PROXY": f"http://127.0.0.1:{corporate.server_address[1]}"}
    with started(tmp_path, upstreams, shell) as proxy:
        elsewhere = f"127.0.0.1:{upstreams['elsewhere'].server_address[1]}"
        assert through(proxy, elsewhere, get(elsewhere)).endswith(b"elsewhere host=" + elsewhere.encode() + b" path=/")
        sts = "sts.us-east-1.amazonaws.com"
        assert through(proxy, f"{sts}:443", get(sts), tls_host=sts).endswith(f"aws host={sts} path=/".encode())
    corporate.shutdown()
    assert RecordingProxy.asked == [f"CONNECT {elsewhere}"]  # AWS hostnames never leave for the shell's proxy
