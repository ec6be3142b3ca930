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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import json
import logging
import os
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

from sagebox.box import async_inference as aio
from sagebox.box import data_capture, eventstream, runtime_params, serverless, shadow
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
from sagebox.box.upstream import HttpUpstream, Upstream, UpstreamResponse, UpstreamTimeout, UpstreamUnavailable

log = logging.getLogger("sagebox.runtime")

ACCOUNT = "123456789012"
MAX_PAYLOAD = 6 * 1024 * 1024
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
INVOKED_VARIANT = "X-Amzn-Invoked-Production-Variant"
TARGET_VARIANT = "X-Amzn-SageMaker-Target-Variant"
# InvokeEndpointWithResponseStream's own headers, and its body's media type.
STREAM_ACCEPT = "X-Amzn-SageMaker-Accept"
STREAM_CONTENT_TYPE = "X-Amzn-SageMaker-Content-Type"
EVENT_STREAM = "application/vnd.amazon.eventstream"
COLD_START = "X-Sagebox-Cold-Start-Ms"
SEED_ENV = "SAGEBOX_GATEWAY_SEED"
# Copies of requests in flight to one endpoint's shadow at once; more are dropped (and counted), never queued.
MAX_SHADOW_IN_FLIGHT = 16
# Serverless metrics (https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-monitoring.html).
MODEL_SETUP_TIME = "ModelSetupTime"


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
    caller's TargetVariant), which of its instances (in turn), and whether a shadow gets a copy (its sampled share).

    `rng` is one generator for every endpoint (tests); else each endpoint has its own, seeded from `seed` and the
    endpoint's name when a seed is given, so one endpoint's sequence of choices does not depend on others' traffic."""

    def __init__(self, rng: random.Random | None = None, seed: int | None = None) -> None:
        self._shared = rng
        self._seed = seed
        self._rngs: dict[str, random.Random] = {}
        self._turns: dict[tuple[str, str, tuple[str, ...]], Iterator[str]] = {}

    def rng(self, endpoint: str) -> random.Random:
        if self._shared is not None:
            return self._shared
        found = self._rngs.get(endpoint)
        if found is None:
            found = self._rngs[endpoint] = random.Random(None if self._seed is None else f"{self._seed}:{endpoint}")
        return found

    def choose(self, route: Route, target: str | None) -> Choice | None:
        rng = self.rng(route.endpoint)
        fleets = route.fleets()
        if target:
            having = [(config, share, v) for config, share, variants in fleets for v in variants if v.name == target]
            if not having:
                return None
            config, _, variant = (
                having[0] if len(having) == 1 else rng.choices(having, weights=[h[1] for h in having])[0]
            )
            return Choice(config, variant, len(variant.urls))
        if len(fleets) == 1:
            config, _, variants = fleets[0]
        else:
            config, _, variants = rng.choices(fleets, weights=[f[1] for f in fleets])[0]
        if not variants:
            return None
        weights = [max(0.0, v.weight) for v in variants]
        chosen = variants[0] if sum(weights) <= 0 else rng.choices(variants, weights=weights)[0]
        return Choice(config, chosen, len(chosen.urls))

    def mirrored(self, route: Route) -> list[VariantRoute]:
        """The shadows that get a copy of this request: each with the probability of its sampled share."""
        rng = self.rng(route.endpoint)
        return [s for s in route.shadows if s.weight >= 1 or (s.weight > 0 and rng.random() < s.weight)]

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


@dataclass
class Forwarded:
    """One call to an instance: the container's answer, or why there was none."""

    url: str | None
    response: UpstreamResponse | None = None
    error: str = ""  # "timeout" | "unavailable" | "no-instance"
    model_s: float | None = None

    @property
    def status(self) -> int:
        if self.response is not None:
            return int(self.response.status_code)
        return 504 if self.error == "timeout" else 503


def throttled(name: str, variant: VariantRoute) -> Response:
    """SageMaker's answer past a serverless variant's MaxConcurrency: 429 ThrottlingException (boto3 retries it
    as a throttling error)."""
    return aws_error(
        429,
        "ThrottlingException",
        f"Rate exceeded: serverless variant {variant.name} of endpoint {name} is serving its MaxConcurrency of "
        f"{variant.max_concurrency} invocation(s); retry after a brief wait.",
    )


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
) -> Starlette:
    """`metrics` receives the PutMetricData datums every `flush_s` (default: the box's embedded CloudWatch);
    `async_store` reads asynchronous inputs and writes their outcomes and the captured data (default: the embedded S3
    and SNS); `capturer` samples invocations for data capture. The state directory (beside `routes_path`) also
    receives the serverless activity file and the shadow logs."""
    state_dir = routes_path.parent
    table = RouteTable(routes_path)
    client = upstream or HttpUpstream(timeout_s=60.0, connect_timeout_s=2.0)
    pick = picker or Picker()
    store = async_store if async_store is not None else aio.EmbeddedAsyncStore(state_dir)
    capture = capturer or data_capture.Capturer()
    sink = metrics if metrics is not None else EmbeddedCloudWatch(state_dir)
    resolution = getattr(sink, "resolution_s", None)
    recorder = InvocationRecorder(resolution() if callable(resolution) else 1.0)
    activity = serverless.ActivityTracker(now)
    extra_datums: list[dict[str, Any]] = []
    shadow_records: list[shadow.ShadowRecord] = []
    shadow_in_flight: dict[str, int] = {}
    background: set[asyncio.Task[Any]] = set()

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

    def outcome_of(status: int) -> str:
        return OK if status < 400 else CLIENT_ERROR if status < 500 else SERVER_ERROR

    def datum(name: str, dims: dict[str, str], value: float, unit: str) -> dict[str, Any]:
        return {
            "MetricName": name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
            "Timestamp": datetime.datetime.fromtimestamp(now(), datetime.UTC),
            "Value": value,
            "Unit": unit,
        }

    async def forward(url: str | None, body: bytes, headers: dict[str, str]) -> Forwarded:
        if url is None:
            return Forwarded(None, error="no-instance")
        sent = timer()
        try:
            response = await client.post(url, "/invocations", body, headers)
        except UpstreamTimeout:
            return Forwarded(url, error="timeout")
        except UpstreamUnavailable as exc:
            log.warning("instance %s unreachable: %s", url, exc)
            return Forwarded(url, error="unavailable")
        return Forwarded(url, response, model_s=timer() - sent)

    def write_activity() -> None:
        serverless.write_activity(state_dir, activity.snapshot())

    async def warm_variant(name: str, variant: VariantRoute, failed: str | None = None) -> VariantRoute | None:
        """A serverless variant with an instance: at once if it has one, else after the control plane's cold
        start (None: the endpoint went away, or the start took longer than the variant's start-up timeout). An
        instance `failed` to answer is not waited for again."""

        def ready(found: VariantRoute) -> bool:
            return bool(found.urls) and not found.cold and failed not in found.urls

        if ready(variant):
            return variant
        key = (name, variant.name)
        activity.wait_begin(key)
        write_activity()  # the control plane starts the instance when it reads that a request waits
        deadline = timer() + variant.startup_timeout_s
        try:
            while timer() < deadline:
                route = table.get(name)
                current = route.variant(variant.name) if route else None
                if current is None:
                    return None
                if ready(current):
                    return current
                await asyncio.sleep(poll_s)
            return None
        finally:
            activity.wait_end(key)

    def mirror(
        route: Route, config: str, copies: list[VariantRoute], body: bytes, headers: dict[str, str]
    ) -> asyncio.Future[tuple[str, int, float, bytes]]:
        """Send each shadow its copy now, beside the production call; record both once both answered. The
        returned future takes production's (variant, status, latency, body); it never delays production."""
        production: asyncio.Future[tuple[str, int, float, bytes]] = asyncio.get_running_loop().create_future()
        for copy in copies:
            if shadow_in_flight.get(route.endpoint, 0) >= MAX_SHADOW_IN_FLIGHT:
                task = asyncio.ensure_future(record_dropped(route.endpoint, production))
            else:
                shadow_in_flight[route.endpoint] = shadow_in_flight.get(route.endpoint, 0) + 1
                task = asyncio.ensure_future(shadow_call(route, config, copy, body, headers, production))
            background.add(task)
            task.add_done_callback(background.discard)
        return production

    async def record_dropped(endpoint: str, production: asyncio.Future[tuple[str, int, float, bytes]]) -> None:
        variant, status, latency, out = await production
        side = shadow.Side(variant, status, round(latency * 1000, 3), shadow.answer_of(status, out))
        shadow_records.append(shadow.ShadowRecord(now(), endpoint, side, None))

    async def shadow_call(
        route: Route,
        config: str,
        copy: VariantRoute,
        body: bytes,
        headers: dict[str, str],
        production: asyncio.Future[tuple[str, int, float, bytes]],
    ) -> None:
        started = timer()
        try:
            result = await forward(pick.url(route, copy), body, headers)
        finally:
            shadow_in_flight[route.endpoint] -= 1
        status = result.status
        measured(Choice(config, copy, len(copy.urls)), route.endpoint, started, outcome_of(status), result.model_s)
        out = result.response.body if result.response is not None else b""
        mine = shadow.Side(copy.name, status, round((result.model_s or 0.0) * 1000, 3), shadow.answer_of(status, out))
        variant, p_status, p_latency, p_body = await production
        theirs = shadow.Side(variant, p_status, round(p_latency * 1000, 3), shadow.answer_of(p_status, p_body))
        shadow_records.append(shadow.ShadowRecord(now(), route.endpoint, theirs, mine))

    async def invoke(request: Request) -> Response:
        return await answer(request, stream=False)

    async def invoke_stream(request: Request) -> Response:
        return await answer(request, stream=True)

    async def answer(request: Request, stream: bool) -> Response:
        """InvokeEndpoint, or with `stream` InvokeEndpointWithResponseStream: the same request to the container,
        whose answer then goes back as an event stream of PayloadPart events (its Accept header is
        X-Amzn-SageMaker-Accept). The box reads the container's answer whole, so the stream carries it as one part;
        errors before the answer are the same as InvokeEndpoint's."""
        started = timer()
        name = request.path_params["name"]
        constraints = runtime_params.INVOKE_ENDPOINT_WITH_RESPONSE_STREAM if stream else runtime_params.INVOKE_ENDPOINT
        invalid = runtime_params.validation_message(name, request.headers, constraints)
        if invalid is not None:
            return aws_error(400, "ValidationError", invalid)
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
        is_serverless = variant.max_concurrency is not None
        url = pick.url(route, variant)
        if url is None and not (is_serverless and variant.cold):
            measured(choice, name, started, SERVER_ERROR, None)
            return aws_error(503, "ServiceUnavailable", f"Endpoint {name} has no healthy instance of {variant.name}.")
        try:
            body = await read_limited(request, MAX_PAYLOAD)
        except BodyTooLarge as exc:
            return aws_error(413, "ValidationError", str(exc))
        headers = {"Content-Type": request.headers.get("content-type", "application/octet-stream")}
        accept = request.headers.get(STREAM_ACCEPT if stream else "accept")
        if accept is not None:
            headers["accept"] = accept
        if CUSTOM_ATTRIBUTES.lower() in request.headers:
            headers[CUSTOM_ATTRIBUTES.lower()] = request.headers[CUSTOM_ATTRIBUTES.lower()]
        key = (name, variant.name)
        if is_serverless and not activity.admit(key, int(variant.max_concurrency or 1)):
            return throttled(name, variant)
        copies = pick.mirrored(route) if route.shadows else []
        production = mirror(route, choice.config, copies, body, headers) if copies else None
        status, latency, out = 503, 0.0, b""
        try:
            cold_s: float | None = None
            if is_serverless and (url is None or variant.cold):
                waited = timer()
                warm = await warm_variant(name, variant)
                cold_s = timer() - waited
                if warm is None:
                    measured(choice, name, started, SERVER_ERROR, None)
                    return aws_error(
                        503,
                        "ServiceUnavailable",
                        f"Serverless variant {variant.name} of endpoint {name} did not start.",
                    )
                choice = Choice(choice.config, warm, len(warm.urls))
                url = pick.url(route, warm)
            result = await forward(url, body, headers)
            if result.error == "unavailable" and is_serverless and cold_s is None:
                # Scaled to zero between reading the route and the call: wait for the cold start, once.
                waited = timer()
                warm = await warm_variant(name, variant, failed=result.url)
                cold_s = timer() - waited
                if warm is not None:
                    choice = Choice(choice.config, warm, len(warm.urls))
                    result = await forward(warm.urls[0], body, headers)
            if cold_s is not None:
                dims = {"EndpointName": name, "VariantName": variant.name}
                extra_datums.append(datum(MODEL_SETUP_TIME, dims, round(cold_s * 1e6, 1), "Microseconds"))
            status, latency = result.status, result.model_s or 0.0
            if result.response is None:
                measured(choice, name, started, SERVER_ERROR, None)
                if result.error == "timeout":
                    return aws_error(
                        424, "ModelError", "Model container did not respond within 60 seconds.", OriginalStatusCode=504
                    )
                return aws_error(503, "ServiceUnavailable", f"Endpoint {name} is not reachable; is it running?")
            upstream = result.response
            out = upstream.body
            measured(choice, name, started, outcome_of(status), result.model_s)
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
            out_headers = {INVOKED_VARIANT: choice.variant.name}
            if CUSTOM_ATTRIBUTES.lower() in upstream.headers:
                out_headers[CUSTOM_ATTRIBUTES] = upstream.headers[CUSTOM_ATTRIBUTES.lower()]
            if cold_s is not None:
                out_headers[COLD_START] = f"{cold_s * 1000:.0f}"
            content_type = upstream.headers.get("content-type", "application/octet-stream")
            if route.capture_config is not None:
                capture.offer(
                    route.capture_config,
                    name,
                    choice.variant.name,
                    (body, headers["Content-Type"]),
                    (upstream.body, content_type),
                    now(),
                    request.headers.get(aio.INFERENCE_ID.lower()),
                )
            if stream:
                out_headers[STREAM_CONTENT_TYPE] = content_type
                parts = eventstream.payload_part(upstream.body) if upstream.body else b""
                return Response(parts, status_code=200, media_type=EVENT_STREAM, headers=out_headers)
            return Response(upstream.body, status_code=200, media_type=content_type, headers=out_headers)
        finally:
            if is_serverless:
                activity.release(key)
            if production is not None and not production.done():
                production.set_result((choice.variant.name, status, latency, out))

    async def invoke_async_job(job: aio.Job, body: bytes) -> aio.Answer:
        """An asynchronous request's call to an instance, measured like any invocation."""
        started = timer()
        route = table.get(job.endpoint)
        choice = pick.choose(route, None) if route is not None else None
        if route is None or choice is None:
            return aio.Answer(0, b"", "text/plain", f"Endpoint {job.endpoint} no longer serves.")
        headers = {"Content-Type": job.content_type}
        if job.accept:
            headers["accept"] = job.accept
        if job.custom_attributes:
            headers[CUSTOM_ATTRIBUTES.lower()] = job.custom_attributes
        result = await forward(pick.url(route, choice.variant), body, headers)
        measured(choice, job.endpoint, started, outcome_of(result.status), result.model_s)
        if result.response is None:
            why = "did not respond within 60 seconds" if result.error == "timeout" else "could not be reached"
            return aio.Answer(0, b"", "text/plain", f"The model container {why}.")
        response = result.response
        kind = response.headers.get("content-type", "application/octet-stream")
        reason = "" if response.status_code < 400 else f"The model container answered {response.status_code}."
        return aio.Answer(int(response.status_code), response.body, kind, reason)

    def async_capacity(endpoint: str) -> int:
        route = table.get(endpoint)
        if route is None or route.async_config is None:
            return 1
        instances = sum(len(v.urls) for v in route.variants)
        return max(1, instances) * aio.per_instance(route.async_config)

    dispatcher = aio.AsyncDispatcher(
        store,
        invoke_async_job,
        async_capacity,
        region,
    )

    async def invoke_async(request: Request) -> Response:
        name = request.path_params["name"]
        invalid = runtime_params.validation_message(name, request.headers, runtime_params.INVOKE_ENDPOINT_ASYNC)
        if invalid is not None:
            return aws_error(400, "ValidationError", invalid)
        route = table.get(name)
        if route is None:
            return aws_error(400, "ValidationError", f"Endpoint {name} of account {ACCOUNT} not found.")
        if route.async_config is None:
            return aws_error(
                400, "ValidationError", f"Endpoint {name} has no AsyncInferenceConfig: invoke it with InvokeEndpoint."
            )
        location = request.headers.get(aio.INPUT_LOCATION.lower(), "").strip()
        if not location:
            return aws_error(400, "ValidationError", "InputLocation (X-Amzn-SageMaker-InputLocation) is required.")
        try:
            aio.split_s3(location)
        except aio.AsyncError as exc:
            return aws_error(400, "ValidationError", str(exc))
        await request.body()  # InvokeEndpointAsync sends no payload; the input is in S3
        job = aio.Job(
            endpoint=name,
            inference_id=request.headers.get(aio.INFERENCE_ID.lower()) or aio.new_inference_id(),
            input_location=location,
            content_type=request.headers.get(aio.CONTENT_TYPE.lower(), "application/octet-stream"),
            accept=request.headers.get(aio.ACCEPT.lower()),
            custom_attributes=request.headers.get(CUSTOM_ATTRIBUTES.lower()),
            config=route.async_config,
            received_at=now(),
        )
        dispatcher.submit(job)
        where = job.where
        return Response(
            json.dumps({"InferenceId": job.inference_id}),
            status_code=202,
            media_type="application/json",
            headers={aio.OUTPUT_LOCATION: where.output, aio.FAILURE_LOCATION: where.failure},
        )

    def backlog_datums() -> list[dict[str, Any]]:
        """ApproximateBacklogSize and ...PerInstance of every asynchronous endpoint, zeros included (target tracking
        scales in on them)."""
        datums = []
        names = set(dispatcher.endpoints()) | {n for n, r in table.all().items() if r.async_config is not None}
        for name in sorted(names):
            route = table.get(name)
            if route is None or route.async_config is None:
                continue
            backlog = float(dispatcher.backlog(name))
            instances = max(1, sum(len(v.urls) for v in route.variants))
            dims = {"EndpointName": name}
            datums.append(datum("ApproximateBacklogSize", dims, backlog, "Count"))
            datums.append(datum("ApproximateBacklogSizePerInstance", dims, backlog / instances, "Count"))
        return datums

    async def health(request: Request) -> Response:
        return Response('{"status": "ok"}', media_type="application/json")

    async def flush() -> None:
        if callable(resolution):  # box time: one box second, as the embedded AWS says (it may start later)
            recorder.resolution_s = resolution()
        loop = asyncio.get_running_loop()
        if activity.changed:
            write_activity()
        if shadow_records:
            taken = list(shadow_records)
            del shadow_records[: len(taken)]
            await loop.run_in_executor(None, shadow.append, state_dir, taken)
        datums = recorder.drain() + backlog_datums()
        if extra_datums:
            datums += extra_datums
            extra_datums.clear()
        if datums:
            await loop.run_in_executor(None, sink.publish, datums)
        for captured in capture.drain():
            try:
                await loop.run_in_executor(
                    None, store.write, captured.bucket, captured.key, captured.body, "application/jsonl"
                )
            except Exception as exc:  # as on SageMaker, a capture that cannot be written never fails an invocation
                log.warning("data capture to s3://%s/%s failed: %s", captured.bucket, captured.key, exc)

    stopping = asyncio.Event()

    async def flush_every_interval() -> None:
        # Stopped by an event, never cancelled: a flush drains what it publishes first, so a cancel that lands
        # while it waits on the publisher would lose that second's datums and shadow records (seen in CI: a
        # gateway shut down right after a shadow pair was written published no Invocations at all).
        while not stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), flush_s)
            if stopping.is_set():
                return
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
            stopping.set()
            await flusher  # lets a flush under way finish; the last flush below publishes the rest
            await dispatcher.aclose()
            for task in list(background):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(task, 5)
            with contextlib.suppress(Exception):
                await flush()
            await client.aclose()

    return Starlette(
        routes=[
            HttpRoute("/endpoints/{name}/invocations", invoke, methods=["POST"]),
            HttpRoute("/endpoints/{name}/async-invocations", invoke_async, methods=["POST"]),
            HttpRoute("/endpoints/{name}/invocations-response-stream", invoke_stream, methods=["POST"]),
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
