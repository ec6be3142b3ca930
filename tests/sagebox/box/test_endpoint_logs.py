"""Endpoint logs' parts: names as SageMaker gives them, whole lines from output, Docker's timestamps, the cap per
stream (on moto's real CloudWatch Logs backend, read back through its own FilterLogEvents), the shipper, and the
instances' output readers (a real process, a stand-in container's logs stream)."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sagebox.box.endpoint_logs import (
    LineBuffer,
    LogCap,
    LoggedLauncher,
    LogShipper,
    MotoLogs,
    clip,
    docker_timestamp_ms,
    events_per_stream,
    log_group,
    log_stream,
    new_instance_id,
)
from sagebox.errors import SageboxError


def test_names_follow_sagemakers_log_groups_and_streams() -> None:
    assert log_group("sagebox-c6i-int8") == "/aws/sagemaker/Endpoints/sagebox-c6i-int8"
    instance = new_instance_id()
    assert re.fullmatch(r"i-[0-9a-f]{17}", instance)
    assert log_stream("AllTraffic", instance) == f"AllTraffic/{instance}"


def test_output_becomes_whole_lines_and_a_cut_line_waits_for_its_end() -> None:
    lines = LineBuffer()
    assert lines.feed(b"first\nsec") == ["first"]
    assert lines.feed(b"ond\r\nthird") == ["second"]
    assert lines.flush() == ["third"] and lines.flush() == []
    assert lines.feed("caf\u00e9 \xff\n".encode("latin-1")) == ["caf\ufffd \ufffd"]  # bad UTF-8 replaced, not raised
    assert len(clip("x" * 300_000).encode()) <= 256 * 1024 - 26


def test_docker_timestamps_become_epoch_milliseconds() -> None:
    assert docker_timestamp_ms("2026-12-04T03:10:51.750123456Z model ready") == (1796353851750, "model ready")
    assert docker_timestamp_ms("2026-12-04T03:10:51Z x y") == (1796353851000, "x y")
    # Whole seconds (podman): the time the line was read, when it falls within that second, and only then.
    assert docker_timestamp_ms("2026-12-04T03:10:51Z x", read_ms=1796353851420) == (1796353851420, "x")
    assert docker_timestamp_ms("2026-12-04T03:10:51Z x", read_ms=1796353853420) == (1796353851000, "x")
    assert docker_timestamp_ms("2026-12-04T03:10:51.750Z x", read_ms=1796353851420) == (1796353851750, "x")
    assert docker_timestamp_ms("no stamp here") == (None, "no stamp here")


def test_the_cap_per_stream_comes_from_the_environment() -> None:
    assert events_per_stream({}) == 10_000
    assert events_per_stream({"SAGEBOX_BOX_LOG_EVENTS_PER_STREAM": "50"}) == 50
    for bad in ("5", "lots", "-1"):
        with pytest.raises(SageboxError, match="SAGEBOX_BOX_LOG_EVENTS_PER_STREAM"):
            events_per_stream({"SAGEBOX_BOX_LOG_EVENTS_PER_STREAM": bad})


@pytest.fixture
def backend() -> Any:
    from moto.logs.models import LogsBackend

    from sagebox.box.embedded_aws import logs

    logs.apply()
    return LogsBackend("us-east-1", "123456789012")


def filtered(backend: Any, group: str) -> list[dict[str, Any]]:
    events, _, _ = backend.filter_log_events(group, [], None, None, None, None, "", False)
    return list(events)


def test_a_stream_keeps_its_last_events_and_says_how_many_it_dropped(backend: Any) -> None:
    sink = MotoLogs(lambda: backend, LogCap(events=10))
    group = log_group("e")
    sink.put(group, "AllTraffic/i-1", [(1000 + i, f"line {i}") for i in range(8)])
    assert [e["message"] for e in filtered(backend, group)] == [f"line {i}" for i in range(8)]
    sink.put(group, "AllTraffic/i-1", [(2000 + i, f"more {i}") for i in range(7)])
    sink.put(group, "AllTraffic/i-1", [(3000, "last")])
    messages = [e["message"] for e in filtered(backend, group)]
    assert len(messages) == 11  # the notice and the last 10
    assert messages[0] == (
        "sagebox: 6 older event(s) of this stream were dropped: the box keeps the last 10 events per stream"
    )
    assert messages[1:] == ["line 6", "line 7", *[f"more {i}" for i in range(7)], "last"]


def test_filter_log_events_interleaves_streams_by_time_as_aws_does(backend: Any) -> None:
    sink = MotoLogs(lambda: backend)
    group = log_group("e")
    sink.put(group, "AllTraffic/i-b", [(10, "b1"), (30, "b2")])
    sink.put(group, "AllTraffic/i-a", [(20, "a1"), (40, "a2")])
    # Asked without `interleaved` (as `aws logs filter-log-events` asks), still in time order across streams.
    assert [e["message"] for e in filtered(backend, group)] == ["b1", "a1", "b2", "a2"]


@dataclass
class Followed:
    instance_id: str
    pending: list[list[tuple[int, str]]] = field(default_factory=list)  # what each read_output hands over
    running: bool = True

    def alive(self) -> bool:
        return self.running

    def read_output(self) -> list[tuple[int, str]]:
        return self.pending.pop(0) if self.pending else []


@dataclass
class Recorded:
    events: list[tuple[str, str, int, str]] = field(default_factory=list)

    def put(self, group: str, stream: str, events: list[tuple[int, str]]) -> None:
        self.events += [(group, stream, ts, message) for ts, message in events]


def test_the_shipper_reads_an_exited_instance_one_last_time_then_lets_it_go() -> None:
    sink = Recorded()
    shipper = LogShipper(sink, clock=lambda: 5.0)
    instance = Followed("i-0001", [[(1, "starting")], [(2, "dying words")]])
    shipper.follow("ep", "AllTraffic", instance)
    shipper.ship_once()
    instance.running = False
    shipper.ship_once()  # exited: its last lines are still shipped
    instance.pending.append([(3, "never read")])
    shipper.ship_once()
    stream = "AllTraffic/i-0001"
    group = "/aws/sagemaker/Endpoints/ep"
    assert sink.events == [(group, stream, 1, "starting"), (group, stream, 2, "dying words")]
    shipper.note("ep", "AllTraffic", "i-0001", "the endpoint failed: because")
    assert sink.events[-1] == (group, stream, 5000, "sagebox: the endpoint failed: because")
    shipper.note("ep", "AllTraffic", None, "model data missing")  # no instance started: a new one's stream
    assert re.fullmatch(r"AllTraffic/i-[0-9a-f]{17}", sink.events[-1][1])


def test_a_note_comes_after_what_the_instance_said() -> None:
    sink = Recorded()
    shipper = LogShipper(sink, clock=lambda: 9.0)
    shipper.follow("ep", "v", Followed("i-2", [[(8, "model refused: bad manifest")]]))
    shipper.note("ep", "v", "i-2", "did not pass the ping health check: model refused: bad manifest")
    assert [m for *_, m in sink.events] == [
        "model refused: bad manifest",
        "sagebox: did not pass the ping health check: model refused: bad manifest",
    ]


def test_a_launched_instance_is_followed() -> None:
    shipper = LogShipper(Recorded())

    class Launcher:
        mode = "processes"

        def launch(self, endpoint: str, variant: Any, index: int, model_dir: Path) -> Followed:
            return Followed("i-9", [[(1, "hello")]])

        def resolve_image(self, image: str) -> str:
            return image + "@sha256:0"

    logged = LoggedLauncher(Launcher(), shipper)
    assert logged.mode == "processes" and logged.resolve_image("x") == "x@sha256:0"
    variant = type("Variant", (), {"name": "AllTraffic"})()
    logged.launch("ep", variant, 0, Path("/m"))
    shipper.ship_once()
    assert shipper._sink.events == [("/aws/sagemaker/Endpoints/ep", "AllTraffic/i-9", 1, "hello")]  # type: ignore[attr-defined]


def test_a_serving_process_output_is_read_from_where_it_started(tmp_path: Path) -> None:
    from sagebox.box.fleet import ProcessInstance

    log = tmp_path / "AllTraffic-0.log"
    log.write_text("the instance before it\n")
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdout.write('no newline')"],
            stdout=out,
        )
    instance = ProcessInstance(process, "http://127.0.0.1:1", log, "image", log_offset=len("the instance before it\n"))
    process.wait()
    lines = [line for _, line in instance.read_output()]
    assert lines == ["ready", "no newline"]  # exited: the unfinished last line comes too
    assert instance.read_output() == []


def test_a_containers_output_is_followed_until_it_stops() -> None:
    from sagebox.box.containers import ContainerInstance

    class Container:
        id = "abc123"

        def logs(self, **options: Any) -> Any:
            assert options == {"stream": True, "follow": True, "timestamps": True}
            yield b"2026-12-04T03:10:51.750Z model rea"
            yield b"dy\n2026-12-04T03:10:52.000Z serving\n"

        def stop(self, timeout: int) -> None:
            pass

        def remove(self, force: bool) -> None:
            pass

    instance = ContainerInstance(Container(), "http://127.0.0.1:1", "image")
    instance.follow_output()
    instance.stop()  # waits for the follower: nothing the container wrote is lost
    assert instance.read_output() == [(1796353851750, "model ready"), (1796353852000, "serving")]
