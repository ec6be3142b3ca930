"""A local SageMaker runtime: InvokeEndpoint (`POST /endpoints/{name}/invocations`) forwarded to serving processes.

boto3's `sagemaker-runtime` client talks to it through `endpoint_url` (or AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME),
and gets SageMaker's own answers: the container's body and headers on success, `ValidationError` for an unknown
endpoint, `ModelError` (424, with OriginalStatusCode/OriginalMessage/LogStreamArn) when the container answers
with an error, `ServiceUnavailable` when it cannot be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as HttpRoute

from sagebox.box.routes import RouteTable
from sagebox.box.upstream import HttpUpstream, Upstream, UpstreamTimeout, UpstreamUnavailable

log = logging.getLogger("sagebox.runtime")

ACCOUNT = "123456789012"
MAX_PAYLOAD = 6 * 1024 * 1024
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INVOKED_VARIANT = "X-Amzn-Invoked-Production-Variant"


def aws_error(status: int, code: str, message: str, **extra: object) -> Response:
    body = {"message": message, "Message": message, **extra}
    return Response(
        json.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.sagemaker/"},
    )


def create_gateway(routes_path: Path, region: str = "us-east-1", upstream: Upstream | None = None) -> Starlette:
    table = RouteTable(routes_path)
    client = upstream or HttpUpstream(timeout_s=60.0, connect_timeout_s=2.0)

    async def invoke(request: Request) -> Response:
        name = request.path_params["name"]
        route = table.get(name)
        if route is None:
            return aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        body = await request.body()
        if len(body) > MAX_PAYLOAD:
            return aws_error(413, "ValidationError", f"Request payload of {len(body)} bytes exceeds the 6 MB limit.")
        headers = {"Content-Type": request.headers.get("content-type", "application/octet-stream")}
        for name_in in ("accept", CUSTOM_ATTRIBUTES.lower()):
            if name_in in request.headers:
                headers[name_in] = request.headers[name_in]
        try:
            upstream = await client.post(route.url, "/invocations", body, headers)
        except UpstreamTimeout:
            return aws_error(
                424, "ModelError", "Model container did not respond within 60 seconds.", OriginalStatusCode=504
            )
        except UpstreamUnavailable as exc:
            log.warning("endpoint %s unreachable at %s: %s", name, route.url, exc)
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
        out_headers = {INVOKED_VARIANT: route.variant}
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
