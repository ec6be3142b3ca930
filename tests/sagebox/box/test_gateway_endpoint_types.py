"""The runtime gateway's endpoint types in process: weighted and targeted routing, shadow copies, serverless
throttling and cold starts, asynchronous invocations. A stand-in upstream answers per instance URL and can hold a
call until the test releases it, so every ordering comes from the test, never from the clock."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from sagebox.box import async_inference as aio
from sagebox.box import data_capture, runtime_gateway, serverless, shadow
from sagebox.box.routes import Route, VariantRoute, save_routes
from sagebox.box.runtime_gateway import Picker, create_gateway
from sagebox.box.upstream import UpstreamResponse, UpstreamUnavailable

T = TypeVar("T")
QUESTION = json.dumps({"question": "Which basin?", "context": "The Amazon basin."}).encode()


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def qa(answer: str) -> tuple[int, bytes]:
    return 200, json.dumps({"answer": answer, "score": 0.9, "start": 0, "end": len(answer)}).encode()


@dataclass
class StandInUpstream:
    """Answers by instance URL; a URL with a gate waits for it; "down" refuses the connection."""

    answers: dict[str, tuple[int, bytes] | str]
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    calls: list[tuple[str, bytes]] = field(default_factory=list)
    waiting: Counter[str] = field(default_factory=Counter)

    async def post_stream(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        return await self.post(base_url, path, body, headers)  # answered whole: its body is one part

    async def post(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        self.calls.append((base_url, body))
        gate = self.gates.get(base_url)
        if gate is not None:
            self.waiting[base_url] += 1
            await gate.wait()
            self.waiting[base_url] -= 1
        answer = self.answers[base_url]
        if answer == "down":
            raise UpstreamUnavailable("connection refused")
        assert not isinstance(answer, str)
        return UpstreamResponse(answer[0], {"content-type": "application/json"}, answer[1])

    async def aclose(self) -> None:
        return None


@dataclass
class Sink:
    datums: list[dict[str, Any]] = field(default_factory=list)

    def publish(self, datums: list[dict[str, Any]]) -> None:
        self.datums.extend(datums)

    def values(self, name: str) -> list[float]:
        return [d["Value"] for d in self.datums if d["MetricName"] == name and "Value" in d]


@dataclass
class Store:
    """S3 and SNS as dicts."""

    objects: dict[tuple[str, str], bytes] = field(default_factory=dict)
    content_types: dict[tuple[str, str], str] = field(default_factory=dict)
    published: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def read(self, bucket: str, key: str) -> bytes:
        if (bucket, key) not in self.objects:
            raise aio.AsyncError("NoSuchKey: The specified key does not exist.")
        return self.objects[(bucket, key)]

    def write(self, bucket: str, key: str, body: bytes, content_type: str) -> None:
        self.objects[(bucket, key)] = body
        self.content_types[(bucket, key)] = content_type

    def publish(self, topic_arn: str, message: str) -> None:
        self.published.append((topic_arn, json.loads(message)))


async def until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the event loop until `condition` holds (a bound on loop turns, not on time, guards a hang)."""
    for _ in range(20_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"never happened: {what}")


@asynccontextmanager
async def gateway(
    routes: Path, upstream: StandInUpstream, sink: Sink | None = None, store: Store | None = None, seed: int = 7
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_gateway(
        routes,
        upstream=upstream,
        picker=Picker(seed=seed),
        metrics=sink or Sink(),
        flush_s=0.01,
        async_store=store or Store(),
        poll_s=0.001,
        capturer=data_capture.Capturer(random.Random(seed)),
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield client


def invoke(client: httpx.AsyncClient, endpoint: str, **headers: str) -> Coroutine[Any, Any, httpx.Response]:
    return client.post(
        f"/endpoints/{endpoint}/invocations", content=QUESTION, headers={"content-type": "application/json", **headers}
    )


# --- production variants ------------------------------------------------------------------------------------------


def split_route() -> Route:
    return Route("ab", (VariantRoute("int8", 0.9, ("http://a1",)), VariantRoute("fp32", 0.1, ("http://b1",))))


def test_a_seeded_90_10_split_routes_within_five_percent_and_is_the_same_every_run() -> None:
    route = split_route()
    picks = [Picker(seed=11).choose(route, None) for _ in range(1)]  # warm the type checker's view
    assert picks[0] is not None
    first = Picker(seed=11)
    choices = [first.choose(route, None) for _ in range(1000)]
    share = sum(1 for c in choices if c is not None and c.variant.name == "int8") / 1000
    assert abs(share - 0.9) <= 0.05
    # The same seed gives the same sequence, whatever another endpoint's traffic does meanwhile.
    second = Picker(seed=11)
    other = Route("other", (VariantRoute("x", 0.5, ("http://x",)), VariantRoute("y", 0.5, ("http://y",))))
    replay = []
    for _ in range(1000):
        second.choose(other, None)
        replay.append(second.choose(route, None))
    assert [c.variant.name for c in replay if c] == [c.variant.name for c in choices if c]
    # A TargetVariant goes to that variant, whatever the weights.
    assert {first.choose(route, "fp32").variant.name for _ in range(20)} == {"fp32"}  # type: ignore[union-attr]


def test_every_variant_answers_its_share_and_says_so(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"ab": split_route()})
    upstream = StandInUpstream({"http://a1": qa("int8 says"), "http://b1": qa("fp32 says")})

    async def main() -> Counter[str]:
        async with gateway(routes, upstream) as client:
            seen: Counter[str] = Counter()
            for _ in range(200):
                response = await invoke(client, "ab")
                assert response.status_code == 200
                variant = response.headers["x-amzn-invoked-production-variant"]
                assert response.json()["answer"] == f"{variant} says"
                seen[variant] += 1
            targeted = await invoke(client, "ab", **{"X-Amzn-SageMaker-Target-Variant": "fp32"})
            assert targeted.headers["x-amzn-invoked-production-variant"] == "fp32"
            return seen

    seen = run(main())
    assert seen["int8"] > seen["fp32"] > 0


# --- shadows ------------------------------------------------------------------------------------------------------


def shadow_route(weight: float = 1.0) -> Route:
    return Route(
        "sh",
        (VariantRoute("prod", 1.0, ("http://p1",)),),
        "cfg",
        shadows=(VariantRoute("candidate", weight, ("http://s1",)),),
    )


def test_a_shadow_gets_a_copy_its_answer_is_recorded_and_production_never_waits_for_it(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"sh": shadow_route()})
    gate = asyncio.Event()
    upstream = StandInUpstream(
        {"http://p1": qa("the Amazon basin"), "http://s1": qa("Amazon basin")}, {"http://s1": gate}
    )
    sink = Sink()

    async def main() -> None:
        async with gateway(routes, upstream, sink) as client:
            response = await invoke(client, "sh")  # answered while the shadow's copy is still held
            assert response.json()["answer"] == "the Amazon basin"
            assert response.headers["x-amzn-invoked-production-variant"] == "prod"
            await until(lambda: upstream.waiting["http://s1"] == 1, "the shadow got its copy")
            assert shadow.load(tmp_path, "sh") == []
            gate.set()
            await until(lambda: len(shadow.load(tmp_path, "sh")) == 1, "the pair was recorded")

    run(main())
    [record] = shadow.load(tmp_path, "sh")
    assert (record.production.variant, record.production.answer) == ("prod", "the Amazon basin")
    assert record.shadow is not None and (record.shadow.variant, record.shadow.answer) == ("candidate", "Amazon basin")
    assert [body for url, body in upstream.calls] == [QUESTION, QUESTION]  # the copy is the same request
    # The shadow's invocations are measured under its own variant name.
    variants = {
        next(d["Value"] for d in datum["Dimensions"] if d["Name"] == "VariantName")
        for datum in sink.datums
        if datum["MetricName"] == "Invocations"
    }
    assert variants == {"prod", "candidate"}


def test_a_failing_or_saturated_shadow_never_fails_production(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime_gateway, "MAX_SHADOW_IN_FLIGHT", 1)
    routes = tmp_path / "routes.json"
    save_routes(routes, {"sh": shadow_route()})
    gate = asyncio.Event()
    upstream = StandInUpstream({"http://p1": qa("prod"), "http://s1": "down"}, {"http://s1": gate})

    async def main() -> None:
        async with gateway(routes, upstream) as client:
            first = await invoke(client, "sh")  # its copy is held: the shadow is saturated
            await until(lambda: upstream.waiting["http://s1"] == 1, "the first copy is in flight")
            second = await invoke(client, "sh")  # its copy is dropped
            assert first.status_code == second.status_code == 200
            gate.set()  # the held copy fails: connection refused
            await until(lambda: len(shadow.load(tmp_path, "sh")) == 2, "both recorded")

    run(main())
    records = shadow.load(tmp_path, "sh")
    dropped = [r for r in records if r.shadow is None]
    failed = [r for r in records if r.shadow is not None]
    assert len(dropped) == 1 and len(failed) == 1
    assert failed[0].shadow is not None and (failed[0].shadow.status, failed[0].shadow.answer) == (503, None)
    summary = shadow.report(records)
    assert (summary["mirrored"], summary["dropped"], summary["shadow_errors"], summary["compared"]) == (1, 1, 1, 0)


def test_a_shadow_gets_about_its_sampled_share(tmp_path: Path) -> None:
    picker = Picker(rng=random.Random(5))
    route = shadow_route(weight=0.25)
    copies = sum(len(picker.mirrored(route)) for _ in range(2000))
    assert abs(copies / 2000 - 0.25) <= 0.03  # seeded: the same every run
    assert picker.mirrored(shadow_route(weight=0.0)) == []


# --- serverless ---------------------------------------------------------------------------------------------------


def serverless_route(urls: tuple[str, ...], cold: bool = False, limit: int = 2) -> Route:
    return Route("sl", (VariantRoute("AllTraffic", 1.0, urls, max_concurrency=limit, cold=cold),))


def test_serverless_invocations_past_max_concurrency_are_throttled(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"sl": serverless_route(("http://i1",), limit=2)})
    gate = asyncio.Event()
    upstream = StandInUpstream({"http://i1": qa("ok")}, {"http://i1": gate})

    async def main() -> None:
        async with gateway(routes, upstream) as client:
            held = [asyncio.ensure_future(invoke(client, "sl")) for _ in range(2)]
            await until(lambda: upstream.waiting["http://i1"] == 2, "two invocations in flight")
            refused = await invoke(client, "sl")
            assert refused.status_code == 429
            assert refused.headers["x-amzn-errortype"].startswith("ThrottlingException")
            assert "MaxConcurrency of 2" in refused.json()["message"]
            gate.set()
            assert [r.status_code for r in await asyncio.gather(*held)] == [200, 200]
            assert (await invoke(client, "sl")).status_code == 200  # room again
            await until(lambda: serverless.read_activity(tmp_path).get(("sl", "AllTraffic")) is not None, "flushed")
            await until(
                lambda: serverless.read_activity(tmp_path)[("sl", "AllTraffic")].in_flight == 0, "in flight written"
            )

    run(main())
    assert len(upstream.calls) == 3  # the throttled request never reached the instance


def test_a_request_to_a_variant_scaled_to_zero_waits_for_its_cold_start(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"sl": serverless_route((), cold=True)})
    upstream = StandInUpstream({"http://i2": qa("warm now")})
    sink = Sink()

    async def main() -> httpx.Response:
        async with gateway(routes, upstream, sink) as client:
            pending = asyncio.ensure_future(invoke(client, "sl"))
            # The control plane's side: it reads that a request waits, then starts an instance and routes to it.
            await until(
                lambda: (
                    serverless.read_activity(tmp_path).get(("sl", "AllTraffic"), serverless.Activity()).waiting == 1
                ),
                "the gateway said a request waits",
            )
            assert not pending.done()
            save_routes(routes, {"sl": serverless_route(("http://i2",))})
            response = await pending
            await until(lambda: bool(sink.values(runtime_gateway.MODEL_SETUP_TIME)), "ModelSetupTime published")
            return response

    response = run(main())
    assert response.status_code == 200 and response.json()["answer"] == "warm now"
    assert int(response.headers[runtime_gateway.COLD_START.lower()]) >= 0
    assert serverless.read_activity(tmp_path)[("sl", "AllTraffic")].waiting == 0


def test_a_serverless_instance_stopped_under_a_request_means_a_cold_start_not_an_error(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"sl": serverless_route(("http://gone",))})
    upstream = StandInUpstream({"http://gone": "down", "http://i3": qa("restarted")})

    async def main() -> httpx.Response:
        async with gateway(routes, upstream) as client:
            pending = asyncio.ensure_future(invoke(client, "sl"))
            await until(
                lambda: (
                    serverless.read_activity(tmp_path).get(("sl", "AllTraffic"), serverless.Activity()).waiting == 1
                ),
                "waiting for a cold start",
            )
            save_routes(routes, {"sl": serverless_route(("http://i3",))})
            return await pending

    response = run(main())
    assert response.status_code == 200 and response.json()["answer"] == "restarted"


# --- asynchronous inference ---------------------------------------------------------------------------------------

ASYNC_CONFIG = {
    "OutputConfig": {
        "S3OutputPath": "s3://results/out",
        "S3FailurePath": "s3://results/failed",
        "NotificationConfig": {
            "SuccessTopic": "arn:aws:sns:us-east-1:123456789012:ok",
            "ErrorTopic": "arn:aws:sns:us-east-1:123456789012:err",
        },
    },
    "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1},
}


def async_route(url: str = "http://q1") -> Route:
    return Route("aq", (VariantRoute("AllTraffic", 1.0, (url,)),), "cfg", async_config=ASYNC_CONFIG)


def invoke_async(client: httpx.AsyncClient, location: str, inference_id: str) -> Coroutine[Any, Any, httpx.Response]:
    return client.post(
        "/endpoints/aq/async-invocations",
        headers={
            aio.INPUT_LOCATION: location,
            aio.INFERENCE_ID: inference_id,
            aio.CONTENT_TYPE: "application/json",
        },
    )


def test_an_async_request_reads_s3_writes_its_answer_and_notifies(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"aq": async_route()})
    store = Store({("inputs", "q/1.json"): QUESTION})
    upstream = StandInUpstream({"http://q1": qa("the Amazon basin")})

    async def main() -> httpx.Response:
        async with gateway(routes, upstream, store=store) as client:
            accepted = await invoke_async(client, "s3://inputs/q/1.json", "req-1")
            await until(lambda: ("results", "out/req-1.out") in store.objects, "the answer was written")
            await until(lambda: bool(store.published), "the outcome was published")
            return accepted

    accepted = run(main())
    assert accepted.status_code == 202 and accepted.json() == {"InferenceId": "req-1"}
    assert accepted.headers[aio.OUTPUT_LOCATION.lower()] == "s3://results/out/req-1.out"
    assert accepted.headers[aio.FAILURE_LOCATION.lower()] == "s3://results/failed/req-1-error.out"
    assert json.loads(store.objects[("results", "out/req-1.out")])["answer"] == "the Amazon basin"
    assert upstream.calls == [("http://q1", QUESTION)]  # the input came from S3
    [(topic, message)] = store.published
    assert topic == "arn:aws:sns:us-east-1:123456789012:ok"
    assert message["invocationStatus"] == "Completed" and message["inferenceId"] == "req-1"
    assert message["requestParameters"] == {
        "contentType": "application/json",
        "endpointName": "aq",
        "inputLocation": "s3://inputs/q/1.json",
    }
    assert message["responseParameters"]["outputLocation"] == "s3://results/out/req-1.out"


def test_an_async_failure_goes_to_the_failure_path_and_the_error_topic(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"aq": async_route()})
    store = Store({("inputs", "bad.json"): b"{broken"})
    upstream = StandInUpstream({"http://q1": (400, b'{"status": 400, "message": "not JSON"}')})

    async def main() -> None:
        async with gateway(routes, upstream, store=store) as client:
            assert (await invoke_async(client, "s3://inputs/bad.json", "bad")).status_code == 202
            assert (await invoke_async(client, "s3://inputs/missing.json", "lost")).status_code == 202
            await until(lambda: len(store.published) == 2, "both failures published")

    run(main())
    assert json.loads(store.objects[("results", "failed/bad-error.out")])["message"] == "not JSON"
    assert (
        b"Failed to read the input from s3://inputs/missing.json" in store.objects[("results", "failed/lost-error.out")]
    )
    assert {topic for topic, _ in store.published} == {"arn:aws:sns:us-east-1:123456789012:err"}
    assert {m["invocationStatus"] for _, m in store.published} == {"Failed"}
    assert all(m["failureReason"] for _, m in store.published)
    assert len(upstream.calls) == 1  # the missing input never reached the instance


def test_async_requests_queue_behind_the_instances_capacity_and_the_backlog_is_published(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"aq": async_route()})
    store = Store({("inputs", f"{i}.json"): QUESTION for i in range(3)})
    gate = asyncio.Event()
    upstream = StandInUpstream({"http://q1": qa("x")}, {"http://q1": gate})
    sink = Sink()

    async def main() -> None:
        async with gateway(routes, upstream, sink, store) as client:
            for i in range(3):
                await invoke_async(client, f"s3://inputs/{i}.json", f"r{i}")
            await until(lambda: upstream.waiting["http://q1"] == 1, "one request at the instance")
            await until(lambda: 3.0 in sink.values("ApproximateBacklogSize"), "a backlog of 3 published")
            assert upstream.waiting["http://q1"] == 1  # MaxConcurrentInvocationsPerInstance 1: the others queue
            gate.set()
            await until(lambda: len(store.published) == 3, "all three answered")
            await until(lambda: sink.values("ApproximateBacklogSize")[-1] == 0.0, "the backlog drained")

    run(main())
    assert max(sink.values("ApproximateBacklogSizePerInstance")) == 3.0  # one instance


def test_async_invocations_need_an_async_endpoint_and_an_input_location(tmp_path: Path) -> None:
    routes = tmp_path / "routes.json"
    save_routes(routes, {"aq": async_route(), "rt": Route("rt", (VariantRoute("AllTraffic", 1.0, ("http://r",)),))})

    async def main() -> list[httpx.Response]:
        async with gateway(routes, StandInUpstream({})) as client:
            return [
                await client.post("/endpoints/rt/async-invocations", headers={aio.INPUT_LOCATION: "s3://b/k"}),
                await client.post("/endpoints/aq/async-invocations"),
                await client.post("/endpoints/aq/async-invocations", headers={aio.INPUT_LOCATION: "ftp://b/k"}),
                await client.post("/endpoints/nope/async-invocations", headers={aio.INPUT_LOCATION: "s3://b/k"}),
            ]

    answers = run(main())
    assert [r.status_code for r in answers] == [400, 400, 400, 400]
    assert all(r.headers["x-amzn-errortype"].startswith("ValidationError") for r in answers)
    assert "has no AsyncInferenceConfig" in answers[0].json()["message"]
    assert "InputLocation" in answers[1].json()["message"]


# --- data capture -------------------------------------------------------------------------------------------------


def test_answered_invocations_are_captured_to_s3_and_failures_are_not(tmp_path: Path) -> None:
    capture = {
        "EnableCapture": True,
        "InitialSamplingPercentage": 100,
        "DestinationS3Uri": "s3://captures/dc",
        "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
        "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]},
    }
    routes = tmp_path / "routes.json"
    save_routes(
        routes,
        {
            "cap": Route("cap", (VariantRoute("AllTraffic", 1.0, ("http://c1",)),), capture=capture),
            "bad": Route("bad", (VariantRoute("AllTraffic", 1.0, ("http://c2",)),), capture=capture),
            "off": Route("off", (VariantRoute("AllTraffic", 1.0, ("http://c1",)),)),
        },
    )
    upstream = StandInUpstream({"http://c1": qa("the Amazon basin"), "http://c2": (500, b'{"error": "boom"}')})
    store = Store()

    async def main() -> None:
        async with gateway(routes, upstream, store=store) as client:
            assert (await invoke(client, "cap", **{"X-Amzn-SageMaker-Inference-Id": "trace-1"})).status_code == 200
            assert (await invoke(client, "cap")).status_code == 200
            assert (await invoke(client, "bad")).status_code == 424
            assert (await invoke(client, "off")).status_code == 200
            await until(lambda: sum(1 for k in store.objects if k[1].startswith("dc/cap/")) >= 1, "a capture file")

    run(main())
    assert all(bucket == "captures" for bucket, _ in store.objects)
    keys = sorted(key for _, key in store.objects)
    assert keys and all(key.startswith("dc/cap/AllTraffic/") and key.endswith(".jsonl") for key in keys)
    records = [json.loads(line) for body in store.objects.values() for line in body.decode().splitlines()]
    assert len(records) == 2
    first = records[0]
    assert json.loads(first["captureData"]["endpointInput"]["data"]) == json.loads(QUESTION)
    assert json.loads(first["captureData"]["endpointOutput"]["data"])["answer"] == "the Amazon basin"
    assert first["eventMetadata"]["inferenceId"] == "trace-1" and "inferenceId" not in records[1]["eventMetadata"]
