"""The gateway's measuring and calling parts on their own: how an invocation's time splits into model and overhead
latency, how a status becomes an outcome (sagebox.box.gateway.metering), and how a call to an instance reports each
way it can fail (sagebox.box.gateway.forwarding). Clocks are stand-ins, so every figure is exact."""

from __future__ import annotations

import asyncio
import datetime
from dataclasses import dataclass, field
from typing import Any

import pytest

from sagebox.box.gateway.forwarding import Forwarded, Forwarder
from sagebox.box.gateway.metering import Meter, outcome_of
from sagebox.box.gateway.picking import Choice
from sagebox.box.invocation_metrics import CLIENT_ERROR, OK, SERVER_ERROR
from sagebox.box.routes import VariantRoute
from sagebox.box.upstream import UpstreamResponse, UpstreamTimeout, UpstreamUnavailable


@dataclass
class Clock:
    t: float = 0.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Sink:
    resolution: float = 1.0
    published: list[dict[str, Any]] = field(default_factory=list)

    def publish(self, datums: list[dict[str, Any]]) -> None:
        self.published.extend(datums)

    def resolution_s(self) -> float:
        return self.resolution


def values(datums: list[dict[str, Any]], name: str) -> list[float]:
    """The Values of `name`'s datums with the endpoint-and-variant dimensions."""
    return [
        v
        for d in datums
        if d["MetricName"] == name and {x["Name"] for x in d["Dimensions"]} == {"EndpointName", "VariantName"}
        for v in d["Values"]
    ]


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, OK), (399, OK), (400, CLIENT_ERROR), (499, CLIENT_ERROR), (500, SERVER_ERROR), (504, SERVER_ERROR)],
)
def test_a_status_is_an_outcome_by_its_class(status: int, outcome: str) -> None:
    assert outcome_of(status) == outcome


def test_overhead_is_the_time_not_spent_in_the_container_and_never_negative() -> None:
    clock = Clock()
    meter = Meter(Sink(), now=lambda: 1000.0, timer=clock)
    choice = Choice("cfg", VariantRoute("AllTraffic", 1.0, ("http://a",)), 1)
    clock.t = 0.5
    meter.measured(choice, "ep", started=0.25, outcome=OK, model_s=0.2)  # 0.25 s in all, 0.2 in the container
    meter.measured(choice, "ep", started=0.25, outcome=OK, model_s=0.4)  # a model time longer than the whole call
    meter.measured(choice, "ep", started=0.25, outcome=SERVER_ERROR, model_s=None)  # never answered
    datums = meter.recorder.drain()
    assert values(datums, "ModelLatency") == [200000.0, 400000.0]  # microseconds; the unanswered one has none
    assert values(datums, "OverheadLatency") == [50000.0, 0.0, 250000.0]


def test_extra_datums_are_published_once_and_resolution_follows_the_sink() -> None:
    sink = Sink(resolution=0.1)
    meter = Meter(sink, now=lambda: 1700000000.0, timer=Clock())
    assert meter.recorder.resolution_s == 0.1
    datum = meter.datum("ModelSetupTime", {"EndpointName": "ep"}, 12.5, "Microseconds")
    assert datum == {
        "MetricName": "ModelSetupTime",
        "Dimensions": [{"Name": "EndpointName", "Value": "ep"}],
        "Timestamp": datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC),
        "Value": 12.5,
        "Unit": "Microseconds",
    }
    meter.add(datum)
    assert meter.take_extra() == [datum]
    assert meter.take_extra() == []
    sink.resolution = 0.5  # the embedded AWS started (or restarted) with another box second
    meter.refresh_resolution()
    assert meter.recorder.resolution_s == 0.5


def test_a_sink_without_a_resolution_measures_in_seconds() -> None:
    class Plain:
        def publish(self, datums: list[dict[str, Any]]) -> None:
            return None

    meter = Meter(Plain(), now=lambda: 0.0, timer=Clock())
    meter.refresh_resolution()
    assert meter.recorder.resolution_s == 1.0


@dataclass
class Upstream:
    """Answers, times out or refuses, and moves the clock as if the container took `takes` seconds."""

    clock: Clock
    behaviour: str = "answer"
    takes: float = 0.0
    calls: list[tuple[str, str, bytes, dict[str, str]]] = field(default_factory=list)

    async def post_stream(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        return await self.post(base_url, path, body, headers)  # answered whole: its body is one part

    async def post(self, base_url: str, path: str, body: bytes, headers: dict[str, str]) -> UpstreamResponse:
        self.calls.append((base_url, path, body, headers))
        self.clock.t += self.takes
        if self.behaviour == "timeout":
            raise UpstreamTimeout("read timed out")
        if self.behaviour == "down":
            raise UpstreamUnavailable("connection refused")
        return UpstreamResponse(418, {"content-type": "text/plain"}, b"teapot")

    async def aclose(self) -> None:
        return None


def test_a_call_reports_the_answer_and_the_container_time() -> None:
    clock = Clock(10.0)
    upstream = Upstream(clock, takes=0.125)
    result = asyncio.run(Forwarder(upstream, clock).forward("http://a", b"in", {"Content-Type": "text/plain"}))
    assert upstream.calls == [("http://a", "/invocations", b"in", {"Content-Type": "text/plain"})]
    assert (result.url, result.status, result.error, result.model_s) == ("http://a", 418, "", 0.125)
    assert result.response is not None and result.response.body == b"teapot"


@pytest.mark.parametrize(("behaviour", "error", "status"), [("timeout", "timeout", 504), ("down", "unavailable", 503)])
def test_a_call_that_fails_says_how_with_no_answer_and_no_container_time(
    behaviour: str, error: str, status: int
) -> None:
    clock = Clock()
    result = asyncio.run(Forwarder(Upstream(clock, behaviour, takes=1.0), clock).forward("http://a", b"", {}))
    assert result == Forwarded("http://a", None, error, None)
    assert result.status == status


def test_no_instance_means_no_call() -> None:
    clock = Clock()
    upstream = Upstream(clock)
    result = asyncio.run(Forwarder(upstream, clock).forward(None, b"", {}))
    assert (result.error, result.status, upstream.calls) == ("no-instance", 503, [])
