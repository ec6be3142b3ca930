"""A local SageMaker runtime: InvokeEndpoint (`POST /endpoints/{name}/invocations`) forwarded to serving processes.

boto3's `sagemaker-runtime` client talks to it through `endpoint_url` (or AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME),
and gets SageMaker's own answers: the container's body and headers on success, `ValidationError` for an unknown
endpoint, `ModelError` (424, with OriginalStatusCode/OriginalMessage/LogStreamArn) when the container answers
with an error, `ServiceUnavailable` when it cannot be reached.

During a blue/green update it sends the new fleet its share of the traffic (see sagebox.box.routes). Every
invocation is measured as SageMaker measures it (sagebox.box.invocation_metrics) and published to the embedded
CloudWatch by a background task once a second, off the request path; the box's control plane evaluates alarms
and autoscaling on those metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as HttpRoute

from sagebox.box.invocation_metrics import (
    CLIENT_ERROR,
    FLUSH_S,
    NAMESPACE,
    OK,
    SERVER_ERROR,
    Invocation,
    InvocationRecorder,
    batches,
)
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


@dataclass(frozen=True)
class Choice:
    config: str  # the endpoint config of the fleet that answers
    variant: VariantRoute
    fleet_size: int  # instances of this variant in that fleet


class Picker:
    """Which fleet answers (by its share of traffic during a blue/green update), which variant (by weight, or the
    caller's TargetVariant) and which of its instances (in turn)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._turns: dict[tuple[str, str, tuple[str, ...]], Iterator[str]] = {}

    def choose(self, route: Route, target: str | None) -> Choice | None:
        fleets = route.fleets()
        if target:
            having = [(config, share, v) for config, share, variants in fleets for v in variants if v.name == target]
            if not having:
                return None
            config, _, variant = (
                having[0] if len(having) == 1 else self._rng.choices(having, weights=[h[1] for h in having])[0]
            )
            return Choice(config, variant, len(variant.urls))
        if len(fleets) == 1:
            config, _, variants = fleets[0]
        else:
            config, _, variants = self._rng.choices(fleets, weights=[f[1] for f in fleets])[0]
        if not variants:
            return None
        weights = [max(0.0, v.weight) for v in variants]
        chosen = variants[0] if sum(weights) <= 0 else self._rng.choices(variants, weights=weights)[0]
        return Choice(config, chosen, len(chosen.urls))

    def variant(self, route: Route, target: str | None) -> VariantRoute | None:
        choice = self.choose(route, target)
        return choice.variant if choice else None

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


class MetricsSink(Protocol):
    def publish(self, datums: list[dict[str, Any]]) -> None: ...


class EmbeddedCloudWatch:
    """PutMetricData to the box's embedded AWS, found through the file it writes into the box's state directory
    (re-read when it is missing or a call fails: the embedded AWS may start after the gateway, or restart)."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._client: Any = None
        self._warned_at = -float("inf")

    def _connect(self) -> Any:
        from sagebox.box.embedded_aws.config import ACCESS_KEY, read_endpoint_file

        found = read_endpoint_file(self._state_dir)
        if found is None:
            return None
        import boto3

        return boto3.client(
            "cloudwatch",
            endpoint_url=found.url,
            region_name=found.region,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=ACCESS_KEY,
        )

    def resolution_s(self) -> float:
        from sagebox.box.embedded_aws.config import read_endpoint_file

        found = read_endpoint_file(self._state_dir)
        return found.resolution_s if found else 1.0

    def publish(self, datums: list[dict[str, Any]]) -> None:
        if self._client is None:
            self._client = self._connect()
            if self._client is None:
                return  # no embedded AWS beside this gateway: nothing to publish to
        try:
            for batch in batches(datums):
                self._client.put_metric_data(Namespace=NAMESPACE, MetricData=batch)
        except Exception as exc:  # the embedded AWS stopped or moved: metrics of this second are lost
            self._client = None
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("could not publish invocation metrics to the embedded CloudWatch: %s", exc)


def create_gateway(
    routes_path: Path,
    region: str = "us-east-1",
    upstream: Upstream | None = None,
    picker: Picker | None = None,
    metrics: MetricsSink | None = None,
    flush_s: float = FLUSH_S,
    now: Callable[[], float] = time.time,
    timer: Callable[[], float] = time.perf_counter,
) -> Starlette:
    """`metrics` receives the PutMetricData datums every `flush_s` (default: the box's embedded CloudWatch)."""
    table = RouteTable(routes_path)
    client = upstream or HttpUpstream(timeout_s=60.0, connect_timeout_s=2.0)
    pick = picker or Picker()
    sink = metrics if metrics is not None else EmbeddedCloudWatch(routes_path.parent)
    resolution = getattr(sink, "resolution_s", None)
    recorder = InvocationRecorder(resolution() if callable(resolution) else 1.0)

    def measured(choice: Choice, name: str, started: float, outcome: str, model_s: float | None) -> None:
        total = timer() - started
        recorder.record(
            Invocation(
                now(),
                name,
                choice.variant.name,
                choice.config,
                choice.fleet_size,
                outcome,
                model_s,
                max(0.0, total - (model_s or 0.0)),
            )
        )

    async def invoke(request: Request) -> Response:
        started = timer()
        name = request.path_params["name"]
        route = table.get(name)
        if route is None:
            return aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        target = request.headers.get(TARGET_VARIANT)
        choice = pick.choose(route, target)
        if choice is None:
            return aws_error(
                400, "ValidationError", f"Target variant {target} is not a production variant of endpoint {name}."
            )
        variant = choice.variant
        url = pick.url(route, variant)
        if url is None:
            measured(choice, name, started, SERVER_ERROR, None)
            return aws_error(503, "ServiceUnavailable", f"Endpoint {name} has no healthy instance of {variant.name}.")
        try:
            body = await read_limited(request, MAX_PAYLOAD)
        except BodyTooLarge as exc:
            return aws_error(413, "ValidationError", str(exc))
        headers = {"Content-Type": request.headers.get("content-type", "application/octet-stream")}
        for name_in in ("accept", CUSTOM_ATTRIBUTES.lower()):
            if name_in in request.headers:
                headers[name_in] = request.headers[name_in]
        sent = timer()
        try:
            upstream = await client.post(url, "/invocations", body, headers)
        except UpstreamTimeout:
            measured(choice, name, started, SERVER_ERROR, None)
            return aws_error(
                424, "ModelError", "Model container did not respond within 60 seconds.", OriginalStatusCode=504
            )
        except UpstreamUnavailable as exc:
            measured(choice, name, started, SERVER_ERROR, None)
            log.warning("endpoint %s unreachable at %s: %s", name, url, exc)
            return aws_error(503, "ServiceUnavailable", f"Endpoint {name} is not reachable; is it running?")
        model_s = timer() - sent
        status = upstream.status_code
        measured(choice, name, started, OK if status < 400 else CLIENT_ERROR if status < 500 else SERVER_ERROR, model_s)
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

    async def flush() -> None:
        if callable(resolution):  # box time: one box second, as the embedded AWS says (it may start later)
            recorder.resolution_s = resolution()
        datums = recorder.drain()
        if datums:
            await asyncio.get_running_loop().run_in_executor(None, sink.publish, datums)

    async def flush_every_interval() -> None:
        while True:
            await asyncio.sleep(flush_s)
            try:
                await flush()
            except Exception:  # never let metrics stop the gateway
                log.exception("publishing invocation metrics failed")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        flusher = asyncio.create_task(flush_every_interval())
        try:
            yield
        finally:
            flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flusher
            with contextlib.suppress(Exception):
                await flush()
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
