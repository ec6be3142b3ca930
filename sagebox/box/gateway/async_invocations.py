"""InvokeEndpointAsync in the gateway: the request queued (sagebox.box.async_inference), its backlog reported.

The request names its input in S3 and is answered 202 at once with where its output and failure will be; the
dispatcher then reads the input, calls an instance as any invocation does (measured the same way), and writes the
outcome to S3 and SNS. Each endpoint takes as many requests at once as its instances times its
MaxConcurrentInvocationsPerInstance. The queue's depth is published as ApproximateBacklogSize and
ApproximateBacklogSizePerInstance, zeros included, because target tracking scales in on them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sagebox.box import async_inference as aio
from sagebox.box import runtime_params
from sagebox.box.async_journal import AsyncJournal
from sagebox.box.gateway import wire
from sagebox.box.gateway.forwarding import Forwarder
from sagebox.box.gateway.metering import Meter, outcome_of
from sagebox.box.gateway.picking import Picker
from sagebox.box.routes import Route, RouteTable

# How long a request resumed after a restart waits for its endpoint to serve again (real seconds).
RESUMED_WAIT_S = 600.0


class AsyncInvocations:
    def __init__(
        self,
        table: RouteTable,
        pick: Picker,
        forwarder: Forwarder,
        meter: Meter,
        store: aio.AsyncStore,
        region: str,
        now: Callable[[], float],
        timer: Callable[[], float],
        journal: AsyncJournal | None = None,
        resumed_wait_s: float = RESUMED_WAIT_S,
    ) -> None:
        """`journal` keeps every accepted request on disk; a request resumed from it waits up to `resumed_wait_s`
        for its endpoint to serve again (the control plane redeploys it after a restart)."""
        self._table = table
        self._pick = pick
        self._forwarder = forwarder
        self._meter = meter
        self._now = now
        self._timer = timer
        self._resumed_wait_s = resumed_wait_s
        self.dispatcher = aio.AsyncDispatcher(store, self._invoke_job, self._capacity, region, journal=journal)

    async def invoke_async(self, request: Request) -> Response:
        name = request.path_params["name"]
        invalid = runtime_params.validation_message(name, request.headers, runtime_params.INVOKE_ENDPOINT_ASYNC)
        if invalid is not None:
            return wire.aws_error(400, "ValidationError", invalid)
        route = self._table.get(name)
        if route is None:
            return wire.not_found(name)
        if route.async_config is None:
            return wire.aws_error(
                400, "ValidationError", f"Endpoint {name} has no AsyncInferenceConfig: invoke it with InvokeEndpoint."
            )
        location = request.headers.get(aio.INPUT_LOCATION.lower(), "").strip()
        if not location:
            return wire.aws_error(400, "ValidationError", "InputLocation (X-Amzn-SageMaker-InputLocation) is required.")
        try:
            aio.split_s3(location)
        except aio.AsyncError as exc:
            return wire.aws_error(400, "ValidationError", str(exc))
        await request.body()  # InvokeEndpointAsync sends no payload; the input is in S3
        job = aio.Job(
            endpoint=name,
            inference_id=request.headers.get(aio.INFERENCE_ID.lower()) or aio.new_inference_id(),
            input_location=location,
            content_type=request.headers.get(aio.CONTENT_TYPE.lower(), "application/octet-stream"),
            accept=request.headers.get(aio.ACCEPT.lower()),
            custom_attributes=request.headers.get(wire.CUSTOM_ATTRIBUTES.lower()),
            config=route.async_config,
            received_at=self._now(),
        )
        job = await self.dispatcher.accept(job)  # in the journal before the 202 (sagebox.box.async_journal)
        where = job.where
        return Response(
            json.dumps({"InferenceId": job.inference_id}),
            status_code=202,
            media_type="application/json",
            headers={aio.OUTPUT_LOCATION: where.output, aio.FAILURE_LOCATION: where.failure},
        )

    def backlog_datums(self) -> list[dict[str, Any]]:
        """ApproximateBacklogSize and ...PerInstance of every asynchronous endpoint, zeros included (target tracking
        scales in on them)."""
        datums = []
        configured = {n for n, r in self._table.all().items() if r.async_config is not None}
        names = set(self.dispatcher.endpoints()) | configured
        for name in sorted(names):
            route = self._table.get(name)
            if route is None or route.async_config is None:
                continue
            backlog = float(self.dispatcher.backlog(name))
            instances = max(1, sum(len(v.urls) for v in route.variants))
            dims = {"EndpointName": name}
            datums.append(self._meter.datum("ApproximateBacklogSize", dims, backlog, "Count"))
            datums.append(self._meter.datum("ApproximateBacklogSizePerInstance", dims, backlog / instances, "Count"))
        return datums

    async def _invoke_job(self, job: aio.Job, body: bytes) -> aio.Answer:
        """An asynchronous request's call to an instance, measured like any invocation."""
        started = self._timer()
        route = self._table.get(job.endpoint)
        if route is None and job.resumed:
            route = await self._serving_again(job.endpoint)
        choice = self._pick.choose(route, None) if route is not None else None
        if route is None or choice is None:
            return aio.Answer(0, b"", "text/plain", f"Endpoint {job.endpoint} no longer serves.")
        headers = {"Content-Type": job.content_type}
        if job.accept:
            headers["accept"] = job.accept
        if job.custom_attributes:
            headers[wire.CUSTOM_ATTRIBUTES.lower()] = job.custom_attributes
        result = await self._forwarder.forward(self._pick.url(route, choice.variant), body, headers)
        self._meter.measured(choice, job.endpoint, started, outcome_of(result.status), result.model_s)
        if result.response is None:
            why = "did not respond within 60 seconds" if result.error == "timeout" else "could not be reached"
            return aio.Answer(0, b"", "text/plain", f"The model container {why}.")
        response = result.response
        kind = response.headers.get("content-type", "application/octet-stream")
        reason = "" if response.status_code < 400 else f"The model container answered {response.status_code}."
        return aio.Answer(int(response.status_code), response.body, kind, reason)

    async def _serving_again(self, endpoint: str) -> Route | None:
        """The endpoint's route once the control plane has deployed it again, None after `resumed_wait_s`."""
        waited = 0.0
        while waited < self._resumed_wait_s:
            await asyncio.sleep(0.25)
            waited += 0.25
            route = self._table.get(endpoint)
            if route is not None:
                return route
        return None

    def _capacity(self, endpoint: str) -> int:
        """Requests the endpoint takes at once: its instances times MaxConcurrentInvocationsPerInstance."""
        route = self._table.get(endpoint)
        if route is None or route.async_config is None:
            return 1
        instances = sum(len(v.urls) for v in route.variants)
        return max(1, instances) * aio.per_instance(route.async_config)
