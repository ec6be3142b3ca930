"""Endpoint logs as SageMaker writes them: every instance's stdout and stderr in CloudWatch Logs.

AWS, "Log groups and streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs"
(https://docs.aws.amazon.com/sagemaker/latest/dg/logging-cloudwatch.html): an endpoint's containers log to the group
`/aws/sagemaker/Endpoints/[EndpointName]`, one stream per production variant and instance,
`[production-variant-name]/[instance-id]`. The box does the same in the embedded CloudWatch Logs, for serving
processes and containers alike, so `aws logs filter-log-events`, `get-log-events`, boto3 and `sagebox logs` read
them as on AWS. Each instance gets an EC2-style id (`i-` and 17 hex digits) when it is launched; a replacement is a new
instance with a new stream. When an endpoint or an update fails, its FailureReason is written to the stream of the
instance it concerns, as a line of the box's own (`sagebox: ...`), after whatever the container said.

Log groups outlive their endpoints (as on AWS) until the box stops. Volume is bounded: a stream keeps its last
`events_per_stream` events, and its first event then says how many older ones were dropped.

- `LogCap`: the cap on one stream's events (pure);
- `MotoLogs`: writes events into the embedded AWS's CloudWatch Logs backend (in the same process);
- `LogShipper`: follows every launched instance's output and ships it, on one background thread.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sagebox.box.specs import VariantSpec
from sagebox.errors import SageboxError

log = logging.getLogger("sagebox.logs")

GROUP_PREFIX = "/aws/sagemaker/Endpoints/"
DEFAULT_EVENTS_PER_STREAM = 10_000
# CloudWatch Logs' largest event is 256 KB, 26 bytes of which are its overhead (PutLogEvents' quotas).
MAX_MESSAGE_BYTES = 256 * 1024 - 26
SHIP_EVERY_S = 0.25
BOX_PREFIX = "sagebox: "


EVENTS_ENV = "SAGEBOX_BOX_LOG_EVENTS_PER_STREAM"


def events_per_stream(env: Mapping[str, str]) -> int:
    """The cap on one stream's events: SAGEBOX_BOX_LOG_EVENTS_PER_STREAM (10-10,000,000), else 10,000."""
    raw = env.get(EVENTS_ENV, "").strip()
    if not raw:
        return DEFAULT_EVENTS_PER_STREAM
    if not raw.isdigit() or not 10 <= int(raw) <= 10_000_000:
        raise SageboxError(f"{EVENTS_ENV} must be a whole number of events from 10 to 10000000, got {raw!r}")
    return int(raw)


def log_group(endpoint: str) -> str:
    return f"{GROUP_PREFIX}{endpoint}"


def log_stream(variant: str, instance_id: str) -> str:
    return f"{variant}/{instance_id}"


def new_instance_id() -> str:
    """An EC2-style instance id: `i-` and 17 hex digits."""
    return "i-" + secrets.token_hex(9)[:17]


def clip(message: str) -> str:
    """A line as one CloudWatch event: at most MAX_MESSAGE_BYTES of UTF-8."""
    data = message.encode("utf-8", errors="replace")
    if len(data) <= MAX_MESSAGE_BYTES:
        return message
    return data[: MAX_MESSAGE_BYTES - 3].decode("utf-8", errors="ignore") + "..."


@dataclass
class LineBuffer:
    """Bytes of output in, whole lines out (a line cut off at the end of a read waits for its end, or `flush`)."""

    _partial: bytes = b""

    def feed(self, data: bytes) -> list[str]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        return [line.decode("utf-8", errors="replace").rstrip("\r") for line in lines]

    def flush(self) -> list[str]:
        rest, self._partial = self._partial, b""
        return [rest.decode("utf-8", errors="replace").rstrip("\r")] if rest.strip() else []


def docker_timestamp_ms(line: str, read_ms: int | None = None) -> tuple[int | None, str]:
    """Docker's `logs --timestamps` line (`2026-12-04T03:10:51.750123456Z message`) -> (epoch ms, message); (None,
    line) when it has no such prefix. Podman's Docker API stamps whole seconds (`2026-12-04T18:45:39Z`, measured
    here): then `read_ms`, when the line was read, is the better millisecond if it falls within that second."""
    import datetime

    stamp, _, message = line.partition(" ")
    if not stamp.endswith("Z") or "T" not in stamp:
        return None, line
    whole, _, fraction = stamp[:-1].partition(".")
    try:
        parsed = datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None, line
    second_ms = int(parsed.timestamp()) * 1000
    if fraction.isdigit():
        return second_ms + int((fraction + "000")[:3]), message
    if read_ms is not None and second_ms <= read_ms < second_ms + 1000:
        return read_ms, message
    return second_ms, message


@dataclass(frozen=True)
class LogCap:
    """At most `events` events per stream: the oldest are dropped, and the stream's first event says how many."""

    events: int = DEFAULT_EVENTS_PER_STREAM

    def notice(self, dropped: int) -> str:
        return (
            f"{BOX_PREFIX}{dropped} older event(s) of this stream were dropped: the box keeps the last {self.events} "
            "events per stream"
        )

    def apply(self, kept: list[Any], dropped: int) -> tuple[list[Any], int]:
        """(events to keep, how many are dropped in all) for a stream holding `kept` (its own events, oldest first,
        without the notice) after `dropped` earlier drops."""
        over = len(kept) - self.events
        if over <= 0:
            return kept, dropped
        return kept[over:], dropped + over


class LogSink(Protocol):
    def put(self, group: str, stream: str, events: list[tuple[int, str]]) -> None:
        """Append (timestamp ms, message) events, oldest first, creating the group and stream if need be."""
        ...


@dataclass
class MotoLogs:
    """The embedded CloudWatch Logs (moto's backend, this process's): groups and streams made when first written,
    each stream capped."""

    backend: Callable[[], Any]  # moto's LogsBackend of the box's account and region
    cap: LogCap = field(default_factory=LogCap)
    _dropped: dict[tuple[str, str], int] = field(default_factory=dict)
    _notices: dict[tuple[str, str], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def put(self, group: str, stream: str, events: list[tuple[int, str]]) -> None:
        if not events:
            return
        from moto.logs.models import LogEvent

        backend = self.backend()
        with self._lock:
            if group not in backend.groups:
                backend.create_log_group(group, {})
            streams = backend.groups[group].streams
            if stream not in streams:
                backend.create_log_stream(group, stream)
            target = streams[stream]
            ordered = sorted(events, key=lambda e: e[0])
            target.put_log_events([{"timestamp": ts, "message": clip(message)} for ts, message in ordered])
            key = (group, stream)
            notice = self._notices.get(key)
            if len(target.events) <= self.cap.events + (notice is not None):
                return
            own = [e for e in target.events if e is not notice]
            kept, dropped = self.cap.apply(own, self._dropped.get(key, 0))
            if dropped == self._dropped.get(key, 0):
                return
            self._dropped[key] = dropped
            if notice is None:
                notice = LogEvent(int(time.time() * 1000), {"timestamp": kept[0].timestamp, "message": ""})
                self._notices[key] = notice
            notice.message = self.cap.notice(dropped)
            notice.timestamp = kept[0].timestamp  # sorts first (a stable sort keeps it before its equals)
            target.events = [notice, *kept]  # one assignment: readers see the old list or the new one
            target.stored_bytes = sum(len(e.message) for e in target.events)


class Followed(Protocol):
    """An instance whose output is shipped (sagebox.box.fleet's instances)."""

    instance_id: str

    def alive(self) -> bool: ...

    def read_output(self) -> list[tuple[int, str]]:
        """The lines written since the last call: (timestamp ms, line)."""
        ...


@dataclass
class _Follow:
    group: str
    stream: str
    instance: Followed


class LogShipper:
    """Ships every followed instance's new output every `every_s`; an instance that exited is read one last time and
    dropped. `note` writes a line of the box's own (a failure reason) to an instance's stream."""

    def __init__(self, sink: LogSink, every_s: float = SHIP_EVERY_S, clock: Callable[[], float] = time.time) -> None:
        self._sink = sink
        self._every_s = every_s
        self._clock = clock
        self._follows: list[_Follow] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, endpoint: str, variant: str, instance: Followed) -> None:
        with self._lock:
            self._follows.append(_Follow(log_group(endpoint), log_stream(variant, instance.instance_id), instance))

    def note(self, endpoint: str, variant: str, instance_id: str | None, message: str) -> None:
        """A line of the box's own in `<variant>/<instance_id>` of the endpoint's group, after the instance's output
        (None: an instance that never started, a new stream)."""
        stream = log_stream(variant, instance_id or new_instance_id())
        with self._lock:
            follows = [f for f in self._follows if f.group == log_group(endpoint) and f.stream == stream]
        for followed in follows:
            self._ship(followed)
        self._sink.put(log_group(endpoint), stream, [(int(self._clock() * 1000), f"{BOX_PREFIX}{message}")])

    def _ship(self, followed: _Follow) -> None:
        try:
            lines = followed.instance.read_output()
        except Exception as exc:  # a container removed behind our back, a log file deleted: nothing more to read
            log.warning("cannot read the output of %s: %s", followed.stream, exc)
            lines = []
        if lines:
            self._sink.put(followed.group, followed.stream, lines)

    def ship_once(self) -> None:
        """One round: every followed instance's new output shipped; the ones that exited, read last and dropped."""
        with self._lock:
            follows = list(self._follows)
        done = []
        for followed in follows:
            exited = not followed.instance.alive()  # asked first: whatever it wrote before exiting is read below
            self._ship(followed)
            if exited:
                done.append(followed)
        if done:
            with self._lock:
                self._follows = [f for f in self._follows if f not in done]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="endpoint-logs", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self.ship_once()
            except Exception:  # the shipper must outlive any one bad round
                log.exception("shipping endpoint logs failed")

    def stop(self) -> None:
        """Ship what is left (after the instances stopped) and end the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.ship_once()


@dataclass
class LoggedLauncher:
    """A launcher whose instances' output is shipped to the endpoint's log group (wraps sagebox.box.fleet's)."""

    inner: Any  # sagebox.box.fleet.Launcher
    shipper: LogShipper
    mode: str = ""  # the inner launcher's

    def __post_init__(self) -> None:
        self.mode = str(self.inner.mode)

    def launch(self, endpoint: str, variant: VariantSpec, index: int, model_dir: Path) -> Any:
        instance = self.inner.launch(endpoint, variant, index, model_dir)
        self.shipper.follow(endpoint, variant.name, instance)
        return instance

    def resolve_image(self, image: str) -> str:
        return str(self.inner.resolve_image(image))
