"""A local SageMaker runtime: InvokeEndpoint (`POST /endpoints/{name}/invocations`) forwarded to serving processes.

boto3's `sagemaker-runtime` client talks to it through `endpoint_url` (or AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME),
and gets SageMaker's own answers: the container's body and headers on success, `ValidationError` for an unknown
endpoint, `ModelError` (424, with OriginalStatusCode/OriginalMessage/LogStreamArn) when the container answers
with an error, `ServiceUnavailable` when it cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import random
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as HttpRoute

from sagebox.box.routes import Route, RouteTable, VariantRoute
from sagebox.box.upstream import HttpUpstream, Upstream, UpstreamTimeout, UpstreamUnavailable

log = logging.getLogger("sagebox.runtime")

ACCOUNT = "123456789012"
MAX_PAYLOAD = 6 * 1024 * 1024
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INVOKED_VARIANT = "X-Amzn-Invoked-Production-Variant"
TARGET_VARIANT = "X-Amzn-SageMaker-Target-Variant"


class BodyTooLarge(Exception):
    def __init__(self, size: int) -> None:
        super().__init__(f"Request payload of {size}+ bytes exceeds the 6 MB limit.")


async def read_limited(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes `limit` bytes (by Content-Length, or while streaming)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(size)
        chunks.append(chunk)
    return b"".join(chunks)


class Picker:
    """Which variant answers (by weight, or the caller's TargetVariant) and which of its instances (in turn)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._turns: dict[tuple[str, str, tuple[str, ...]], Iterator[str]] = {}

    def variant(self, route: Route, target: str | None) -> VariantRoute | None:
        if target:
            return route.variant(target)
        weights = [max(0.0, v.weight) for v in route.variants]
        if not route.variants:
            return None
        if sum(weights) <= 0:
            return route.variants[0]
        return self._rng.choices(route.variants, weights=weights)[0]

    def url(self, route: Route, variant: VariantRoute) -> str | None:
        if not variant.urls:
            return None
        key = (route.endpoint, variant.name, variant.urls)
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = itertools.cycle(variant.urls)
        return next(turn)


def aws_error(status: int, code: str, message: str, **extra: object) -> Response:
    body = {"message": message, "Message": message, **extra}
    return Response(
        json.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.sagemaker/"},
    )


def create_gateway(
    routes_path: Path, region: str = "us-east-1", upstream: Upstream | None = None, picker: Picker | None = None
) -> Starlette:
    table = RouteTable(routes_path)
    client = upstream or HttpUpstream(timeout_s=60.0, connect_timeout_s=2.0)
    pick = picker or Picker()

    async def invoke(request: Request) -> Response:
        name = request.path_params["name"]
        route = table.get(name)
        if route is None:
            return aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        target = request.headers.get(TARGET_VARIANT)
        variant = pick.variant(route, target)
        if variant is None:
            return aws_error(
                400, "ValidationError", f"Target variant {target} is not a production variant of endpoint {name}."
            )
        url = pick.url(route, variant)
        if url is None:
            return aws_error(503, "ServiceUnavailable", f"Endpoint {name} has no healthy instance of {variant.name}.")
        try:
            body = await read_limited(request, MAX_PAYLOAD)
        except BodyTooLarge as exc:
            return aws_error(413, "ValidationError", str(exc))
        headers = {"Content-Type": request.headers.get("content-type", "application/octet-stream")}
        for name_in in ("accept", CUSTOM_ATTRIBUTES.lower()):
            if name_in in request.headers:
                headers[name_in] = request.headers[name_in]
        try:
            upstream = await client.post(url, "/invocations", body, headers)
        except UpstreamTimeout:
            return aws_error(
                424, "ModelError", "Model container did not respond within 60 seconds.", OriginalStatusCode=504
            )
        except UpstreamUnavailable as exc:
            log.warning("endpoint %s unreachable at %s: %s", name, url, exc)
            return aws_error(503, "ServiceUnavailable", f"Endpoint {name} is not reachable; is it running?")
        log_stream = f"arn:aws:logs:{region}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/{name}"
        if upstream.status_code >= 400:
            original = upstream.body.decode("utf-8", errors="replace")[:4096]
            kind = "client" if upstream.status_code < 500 else "server"
            message = (
                f'Received {kind} error ({upstream.status_code}) from primary with message "{original}". '
                f"See {log_stream} in account {ACCOUNT} for more information."
            )
            return aws_error(
                424,
                "ModelError",
                message,
                OriginalStatusCode=upstream.status_code,
                OriginalMessage=original,
                LogStreamArn=log_stream,
            )
        out_headers = {INVOKED_VARIANT: variant.name}
        if CUSTOM_ATTRIBUTES.lower() in upstream.headers:
            out_headers[CUSTOM_ATTRIBUTES] = upstream.headers[CUSTOM_ATTRIBUTES.lower()]
        return Response(
            upstream.body,
            status_code=200,
            media_type=upstream.headers.get("content-type", "application/octet-stream"),
            headers=out_headers,
        )

    async def health(request: Request) -> Response:
        return Response('{"status": "ok"}', media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await client.aclose()

    return Starlette(
        routes=[
            HttpRoute("/endpoints/{name}/invocations", invoke, methods=["POST"]),
            HttpRoute("/ping", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


def spawn(routes: Path, log_path: Path, region: str = "us-east-1") -> tuple[str, int]:
    """Start the gateway as a background process on a free port; (its URL, its pid) once it answers."""
    from sagebox.box import processes
    from sagebox.local_server import free_port

    port = free_port()
    args = ["-m", "sagebox.box.runtime_gateway", "--routes", str(routes), "--port", str(port), "--region", region]
    pid = processes.spawn(args, log_path)
    processes.wait_http(f"http://127.0.0.1:{port}/ping", pid, log_path, timeout=60)
    return f"http://localhost:{port}", pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Local SageMaker runtime gateway")
    parser.add_argument("--routes", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stdout)
    app = create_gateway(args.routes, args.region)
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False, loop="uvloop", http="httptools")
    return 0


if __name__ == "__main__":
    sys.exit(main())
