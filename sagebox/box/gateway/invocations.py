"""InvokeEndpoint and InvokeEndpointWithResponseStream: one request to the container that the route table picks.

Parameters that break the API's constraints are refused first (sagebox.box.runtime_params); then the fleet, variant
and instance are chosen (sagebox.box.gateway.picking), the body is read up to SageMaker's 6 MB, a serverless variant
is admitted (or throttled) and, when scaled to zero, waited for; shadows get their copies beside the call. The
container's answer goes back with SageMaker's headers, or as a ModelError; the invocation is measured either way, and
a sampled share of answered invocations is captured (sagebox.box.data_capture). The streaming variant sends the
answer as an event stream of PayloadPart events (sagebox.box.eventstream).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from sagebox.box import async_inference as aio
from sagebox.box import data_capture, eventstream, runtime_params
from sagebox.box.gateway import wire
from sagebox.box.gateway.cold_starts import ColdStarts
from sagebox.box.gateway.forwarding import Forwarder
from sagebox.box.gateway.metering import MODEL_SETUP_TIME, Meter, outcome_of
from sagebox.box.gateway.picking import Choice, Picker
from sagebox.box.gateway.shadowing import Mirror, Production
from sagebox.box.invocation_metrics import SERVER_ERROR
from sagebox.box.routes import RouteTable
from sagebox.box.upstream import UpstreamError, UpstreamTimeout


class Invoker:
    def __init__(
        self,
        table: RouteTable,
        pick: Picker,
        forwarder: Forwarder,
        meter: Meter,
        cold: ColdStarts,
        mirror: Mirror,
        capture: data_capture.Capturer,
        region: str,
        now: Callable[[], float],
        timer: Callable[[], float],
    ) -> None:
        self._table = table
        self._pick = pick
        self._forwarder = forwarder
        self._meter = meter
        self._cold = cold
        self._mirror = mirror
        self._capture = capture
        self._region = region
        self._now = now
        self._timer = timer

    async def invoke(self, request: Request) -> Response:
        return await self.answer(request, stream=False)

    async def invoke_stream(self, request: Request) -> Response:
        return await self.answer(request, stream=True)

    async def answer(self, request: Request, stream: bool) -> Response:
        """InvokeEndpoint, or with `stream` InvokeEndpointWithResponseStream: the same request to the container,
        whose answer then goes back as an event stream of PayloadPart events (its Accept header is
        X-Amzn-SageMaker-Accept), one per chunk the container writes, as it writes them; errors before the answer
        are the same as InvokeEndpoint's."""
        timer, pick, meter, cold = self._timer, self._pick, self._meter, self._cold
        started = timer()
        name = request.path_params["name"]
        constraints = runtime_params.INVOKE_ENDPOINT_WITH_RESPONSE_STREAM if stream else runtime_params.INVOKE_ENDPOINT
        invalid = runtime_params.validation_message(name, request.headers, constraints)
        if invalid is not None:
            return wire.aws_error(400, "ValidationError", invalid)
        route = self._table.get(name)
        if route is None:
            return wire.not_found(name)
        target = request.headers.get(wire.TARGET_VARIANT)
        choice = pick.choose(route, target)
        if choice is None:
            return wire.aws_error(
                400, "ValidationError", f"Target variant {target} is not a production variant of endpoint {name}."
            )
        variant = choice.variant
        is_serverless = variant.max_concurrency is not None
        url = pick.url(route, variant)
        if url is None and not (is_serverless and variant.cold):
            meter.measured(choice, name, started, SERVER_ERROR, None)
            return wire.aws_error(
                503, "ServiceUnavailable", f"Endpoint {name} has no healthy instance of {variant.name}."
            )
        try:
            body = await wire.read_limited(request, wire.MAX_PAYLOAD)
        except wire.BodyTooLarge as exc:
            return wire.aws_error(413, "ValidationError", str(exc))
        headers = {"Content-Type": request.headers.get("content-type", "application/octet-stream")}
        accept = request.headers.get(wire.STREAM_ACCEPT if stream else "accept")
        if accept is not None:
            headers["accept"] = accept
        if wire.CUSTOM_ATTRIBUTES.lower() in request.headers:
            headers[wire.CUSTOM_ATTRIBUTES.lower()] = request.headers[wire.CUSTOM_ATTRIBUTES.lower()]
        key = (name, variant.name)
        if is_serverless and not cold.admit(key, int(variant.max_concurrency or 1)):
            return wire.throttled(name, variant)
        copies = pick.mirrored(route) if route.shadows else []
        production: Production | None = (
            self._mirror.send(route, choice.config, copies, body, headers) if copies else None
        )
        status, latency, out = 503, 0.0, b""
        handed_off = False
        try:
            cold_s: float | None = None
            if is_serverless and (url is None or variant.cold):
                waited = timer()
                warm = await cold.warm_variant(name, variant)
                cold_s = timer() - waited
                if warm is None:
                    meter.measured(choice, name, started, SERVER_ERROR, None)
                    return wire.aws_error(
                        503,
                        "ServiceUnavailable",
                        f"Serverless variant {variant.name} of endpoint {name} did not start.",
                    )
                choice = Choice(choice.config, warm, len(warm.urls))
                url = pick.url(route, warm)
            result = await self._forwarder.forward(url, body, headers, stream)
            if result.error == "unavailable" and is_serverless and cold_s is None:
                # Scaled to zero between reading the route and the call: wait for the cold start, once.
                waited = timer()
                warm = await cold.warm_variant(name, variant, failed=result.url)
                cold_s = timer() - waited
                if warm is not None:
                    choice = Choice(choice.config, warm, len(warm.urls))
                    result = await self._forwarder.forward(warm.urls[0], body, headers, stream)
            if cold_s is not None:
                dims = {"EndpointName": name, "VariantName": variant.name}
                meter.add(meter.datum(MODEL_SETUP_TIME, dims, round(cold_s * 1e6, 1), "Microseconds"))
            status, latency = result.status, result.model_s or 0.0
            if result.response is None:
                meter.measured(choice, name, started, SERVER_ERROR, None)
                if result.error == "timeout":
                    return wire.model_timeout()
                return wire.aws_error(503, "ServiceUnavailable", f"Endpoint {name} is not reachable; is it running?")
            upstream = result.response
            out = upstream.body
            meter.measured(choice, name, started, outcome_of(status), result.model_s)
            if upstream.status_code >= 400:
                return wire.model_error(name, self._region, upstream)
            out_headers = {wire.INVOKED_VARIANT: choice.variant.name}
            if wire.CUSTOM_ATTRIBUTES.lower() in upstream.headers:
                out_headers[wire.CUSTOM_ATTRIBUTES] = upstream.headers[wire.CUSTOM_ATTRIBUTES.lower()]
            if cold_s is not None:
                out_headers[wire.COLD_START] = f"{cold_s * 1000:.0f}"
            content_type = upstream.headers.get("content-type", "application/octet-stream")
            if route.capture_config is not None:
                self._capture.offer(
                    route.capture_config,
                    name,
                    choice.variant.name,
                    (body, headers["Content-Type"]),
                    (upstream.body, content_type),
                    self._now(),
                    request.headers.get(aio.INFERENCE_ID.lower()),
                )
            if stream:
                out_headers[wire.STREAM_CONTENT_TYPE] = content_type
                if upstream.stream is not None:
                    # Each chunk the container writes goes out as a PayloadPart as it arrives; what is settled at
                    # the answer's end (the capture, a serverless slot, a shadow's comparison) is settled then.
                    def settle(whole: bytes) -> None:
                        if is_serverless:
                            cold.release(key)
                        if production is not None and not production.done():
                            production.set_result((choice.variant.name, status, latency, whole))

                    handed_off = True
                    relay = self._relay(upstream.stream, settle)
                    return StreamingResponse(relay, status_code=200, media_type=wire.EVENT_STREAM, headers=out_headers)
                parts = eventstream.payload_part(upstream.body) if upstream.body else b""
                return Response(parts, status_code=200, media_type=wire.EVENT_STREAM, headers=out_headers)
            return Response(upstream.body, status_code=200, media_type=content_type, headers=out_headers)
        finally:
            if not handed_off:
                if is_serverless:
                    cold.release(key)
                if production is not None and not production.done():
                    production.set_result((choice.variant.name, status, latency, out))

    async def _relay(self, chunks: AsyncIterator[bytes], settle: Callable[[bytes], None]) -> AsyncIterator[bytes]:
        """PayloadPart events as the container's chunks arrive; a container that fails mid-answer (its connection
        breaks, or it falls silent past the timeout) ends the stream with ModelStreamError, as SageMaker does."""
        received: list[bytes] = []
        try:
            async for chunk in chunks:
                received.append(chunk)
                yield eventstream.payload_part(chunk)
        except UpstreamTimeout as exc:
            yield eventstream.model_stream_error(str(exc), "ModelInvocationTimeExceeded")
        except UpstreamError as exc:
            yield eventstream.model_stream_error(f"The model container's response stream broke: {exc}")
        finally:
            settle(b"".join(received))
