"""A local SageMaker runtime: InvokeEndpoint (`POST /endpoints/{name}/invocations`) forwarded to serving processes.

boto3's `sagemaker-runtime` client talks to it through `endpoint_url` (or AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME),
and gets SageMaker's own answers: the container's body and headers on success, `ValidationError` for an unknown
endpoint, `ModelError` (424, with OriginalStatusCode/OriginalMessage/LogStreamArn) when the container answers
with an error, `ServiceUnavailable` when it cannot be reached.

During a blue/green update it sends the new fleet its share of the traffic (see sagebox.box.routes). Every
invocation is measured as SageMaker measures it (sagebox.box.invocation_metrics) and published to the embedded
CloudWatch by a background task once a second, off the request path; the box's control plane evaluates alarms
and autoscaling on those metrics.

Endpoint types: requests are split among production variants by weight, or go to the caller's TargetVariant; a
shadow variant gets a copy of its sampled share, sent beside the production call, whose answer is recorded and
never returned (sagebox.box.shadow); a serverless variant is throttled past its MaxConcurrency (429
ThrottlingException) and a request to one scaled to zero waits for its cold start (sagebox.box.serverless:
`X-Sagebox-Cold-Start-Ms` and the ModelSetupTime metric report the wait); InvokeEndpointAsync
(`POST /endpoints/{name}/async-invocations`) queues a request whose input and answer live in S3
(sagebox.box.async_inference), and the queue's depth is published as ApproximateBacklogSize(PerInstance).

InvokeEndpointWithResponseStream (`POST /endpoints/{name}/invocations-response-stream`) sends the container's answer
as an event stream (sagebox.box.eventstream). Parameters that break the API's constraints are refused first
(sagebox.box.runtime_params). An endpoint config's DataCaptureConfig is carried out: a sampled share of answered
invocations is written to S3 once a second as SageMaker's JSON Lines records (sagebox.box.data_capture).

Weighted choices and capture sampling come from seeded generators when `SAGEBOX_GATEWAY_SEED` is set (a test's split
is then the same every run).

This module assembles the gateway from its parts in sagebox.box.gateway (what each holds is listed there) and keeps
the names its callers import; `python -m sagebox.box.runtime_gateway` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import random
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route as HttpRoute

from sagebox.box import async_inference as aio
from sagebox.box import data_capture
from sagebox.box.async_journal import AsyncJournal
from sagebox.box.gateway.async_invocations import AsyncInvocations
from sagebox.box.gateway.cold_starts import ColdStarts
from sagebox.box.gateway.flushing import Flusher
from sagebox.box.gateway.forwarding import Forwarded, Forwarder
from sagebox.box.gateway.invocations import Invoker
from sagebox.box.gateway.metering import MODEL_SETUP_TIME, EmbeddedCloudWatch, Meter, MetricsSink
from sagebox.box.gateway.picking import Choice, Picker
from sagebox.box.gateway.shadowing import MAX_SHADOW_IN_FLIGHT, Mirror
from sagebox.box.gateway.wire import (
    ACCOUNT,
    COLD_START,
    CUSTOM_ATTRIBUTES,
    EVENT_STREAM,
    INVOKED_VARIANT,
    MAX_PAYLOAD,
    STREAM_ACCEPT,
    STREAM_CONTENT_TYPE,
    TARGET_VARIANT,
    BodyTooLarge,
    aws_error,
    read_limited,
    throttled,
)
from sagebox.box.invocation_metrics import FLUSH_S
from sagebox.box.routes import RouteTable
from sagebox.box.upstream import HttpUpstream, Upstream

# The names callers and tests have always imported from here, whichever part of sagebox.box.gateway now holds them.
__all__ = [
    "ACCOUNT",
    "COLD_START",
    "CUSTOM_ATTRIBUTES",
    "EVENT_STREAM",
    "INVOKED_VARIANT",
    "MAX_PAYLOAD",
    "MAX_SHADOW_IN_FLIGHT",
    "MODEL_SETUP_TIME",
    "SEED_ENV",
    "STREAM_ACCEPT",
    "STREAM_CONTENT_TYPE",
    "TARGET_VARIANT",
    "BodyTooLarge",
    "Choice",
    "EmbeddedCloudWatch",
    "Forwarded",
    "MetricsSink",
    "Picker",
    "aws_error",
    "create_gateway",
    "main",
    "read_limited",
    "spawn",
    "throttled",
]

SEED_ENV = "SAGEBOX_GATEWAY_SEED"


def create_gateway(
    routes_path: Path,
    region: str = "us-east-1",
    upstream: Upstream | None = None,
    picker: Picker | None = None,
    metrics: MetricsSink | None = None,
    flush_s: float = FLUSH_S,
    now: Callable[[], float] = time.time,
    timer: Callable[[], float] = time.perf_counter,
    async_store: aio.AsyncStore | None = None,
    poll_s: float = 0.05,
    capturer: data_capture.Capturer | None = None,
    journal: AsyncJournal | None = None,
) -> Starlette:
    """`metrics` receives the PutMetricData datums every `flush_s` (default: the box's embedded CloudWatch);
    `async_store` reads asynchronous inputs and writes their outcomes and the captured data (default: the embedded S3
    and SNS); `capturer` samples invocations for data capture; `journal` keeps the accepted asynchronous requests,
    and those a previous gateway left unfinished are resumed at start (default: in the state directory). The state
    directory (beside `routes_path`) also receives the serverless activity file and the shadow logs."""
    state_dir = routes_path.parent
    table = RouteTable(routes_path)
    client = upstream or HttpUpstream(timeout_s=60.0, connect_timeout_s=2.0)
    pick = picker or Picker()
    store = async_store if async_store is not None else aio.EmbeddedAsyncStore(state_dir)
    capture = capturer or data_capture.Capturer()
    sink = metrics if metrics is not None else EmbeddedCloudWatch(state_dir)
    meter = Meter(sink, now, timer)
    forwarder = Forwarder(client, timer)
    cold = ColdStarts(table, state_dir, now, timer, poll_s)
    # Read here, at assembly, from this module: a test lowers it with monkeypatch on sagebox.box.runtime_gateway.
    mirror = Mirror(pick, forwarder, meter, now, timer, max_in_flight=MAX_SHADOW_IN_FLIGHT)
    invoker = Invoker(table, pick, forwarder, meter, cold, mirror, capture, region, now, timer)
    journaled = journal if journal is not None else AsyncJournal(state_dir)
    asynchronous = AsyncInvocations(table, pick, forwarder, meter, store, region, now, timer, journaled)
    flusher = Flusher(state_dir, meter, sink, asynchronous.backlog_datums, cold, mirror, capture, store, flush_s)

    async def health(request: Request) -> Response:
        return Response('{"status": "ok"}', media_type="application/json")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        flushing = asyncio.create_task(flusher.run())
        asynchronous.dispatcher.resume()
        try:
            yield
        finally:
            flusher.stop()
            await flushing  # lets a flush under way finish; the last flush below publishes the rest
            await asynchronous.dispatcher.aclose()
            await mirror.finish()  # the copies still in flight, so that their records are in the last flush
            with contextlib.suppress(Exception):
                await flusher.flush()
            await client.aclose()
            journaled.close()

    return Starlette(
        routes=[
            HttpRoute("/endpoints/{name}/invocations", invoker.invoke, methods=["POST"]),
            HttpRoute("/endpoints/{name}/async-invocations", asynchronous.invoke_async, methods=["POST"]),
            HttpRoute("/endpoints/{name}/invocations-response-stream", invoker.invoke_stream, methods=["POST"]),
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
    seed = os.environ.get(SEED_ENV, "").strip()
    app = create_gateway(
        args.routes,
        args.region,
        picker=Picker(seed=int(seed)) if seed else None,
        capturer=data_capture.Capturer(random.Random(f"{seed}:capture")) if seed else None,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_config=None, access_log=False, loop="uvloop", http="httptools")
    return 0


if __name__ == "__main__":
    sys.exit(main())
