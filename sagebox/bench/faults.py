"""Fault benchmark: what clients see when a serving process is overloaded, stopped or killed, or when the box's
embedded AWS dies, measured on real processes.

    .venv/bin/python scripts/bench_faults.py [--out .sagebox/bench/faults.json] [--model-dir DIR]
                                             [--only overload,sigterm,kill,restart] [--timeout 2] [--seconds 20]

1. overload: one serving process (`python -m container serve`, SAGEMAKER_MODEL_SERVER_TIMEOUT short) is first
   measured at its capacity (closed loop, one client: QPS, P50/P99), then driven at 4x that QPS for 20 s (open
   loop: latency counts from each request's scheduled arrival, so client-side queueing is not hidden). Reported:
   admitted and refused (503) shares, refused-response and admitted latency, admitted requests the server cut at
   their deadline (504), the server's RSS before, at peak and after, and the latency of a closed loop right after
   the overload against the one before (recovery).
2. sigterm: clients in a closed loop; once the server confirms (its /stats `in_flight`) that it holds every request
   the clients have outstanding, SIGTERM: every one of those requests must be answered, the exit must be clean.
3. kill: an endpoint in an embedded AWS (process mode) under an open-loop load through boto3's sagemaker-runtime
   client (botocore retries off, so every error is seen); SIGKILL its serving process while a request is out (the
   benchmark waits for one); every response is an answer
   or a retryable error (ServiceUnavailable, ModelError with the container's 503, throttling); recovery time is from
   the kill to the first answer to a request sent after it.
4. restart: `sagebox up` (one target, the model packaged), then SIGKILL of its embedded AWS: `sagebox status` must
   say so, and `sagebox up` again must bring the endpoint back to InService; both `up`s are timed, and the box's
   listening sockets (every process of the box) are recorded: all must be on loopback.

An overload or SIGTERM request is one question on a long context (the rainforest paragraph repeated 8 times, ~2,000
tokens: 8 windows), so that with the tiny default model the server, not the Python client sharing its 2 cores, is
the bottleneck: on a one-paragraph request the tiny model's call (~1 ms) costs less than tokenizing it, and the
client's HTTP work is of the same order. The box scenarios send one paragraph, keeping their load well under one
serving process's capacity.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import ipaddress
import json
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.stats import summarize_ms

ANSWER = "answer"
RETRYABLE = "retryable"  # the client may retry: ServiceUnavailable, throttling, the container's own 503
OTHER = "other"  # anything else: a fault must never produce one
# Error codes of InvokeEndpoint that ask the client to retry later (the runtime API's ServiceUnavailable and the
# throttling codes botocore's standard retry mode treats as transient).
RETRYABLE_CODES = frozenset({"ServiceUnavailable", "ThrottlingException", "Throttling", "TooManyRequestsException"})
DEADLINE = "DeadlineExceeded"  # the server's own 504: its SAGEMAKER_MODEL_SERVER_TIMEOUT passed, the work was cut
# The box's control plane replaces a dead instance; the waits below only guard against a hang.
HANG_GUARD_S = 300.0
# A manifest's variant -> the infra/targets.json target `sagebox up` deploys it as (restart scenario).
TARGET_OF_VARIANT = {"fp32": "c6i-fp32", "int8": "c6i-int8", "neuron": "inf2-neuron"}


# --- outcomes (pure) ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What one request got: the HTTP status (0: no response at all), an error code, a short detail."""

    outcome: str
    status: int
    code: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Call:
    """One request as its client saw it: `due` is when it was sent (open loop: its scheduled arrival)."""

    due: float
    done: float
    reply: Reply

    @property
    def latency_s(self) -> float:
        return self.done - self.due

    @property
    def outcome(self) -> str:
        return self.reply.outcome


def is_answer(body: bytes) -> bool:
    """A QA answer as the container renders it: a JSON object with an "answer" (or a list of them)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    items = parsed if isinstance(parsed, list) else [parsed]
    return bool(items) and all(isinstance(item, dict) and "answer" in item for item in items)


def error_message(body: bytes) -> str:
    """The container's JSON error reason ({"error", "status", "message"}), or "" when the body is not one."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    message = parsed.get("message") if isinstance(parsed, dict) else None
    return message.strip() if isinstance(message, str) else ""


def classify_server(status: int, body: bytes) -> Reply:
    """A serving process's own response: 200 with an answer; 503 with a JSON reason is a clean refusal; 504 with a
    JSON reason is the server cutting an admitted request at its deadline (not retryable, and not a clean outcome)."""
    if status == 200 and is_answer(body):
        return Reply(ANSWER, status)
    message = error_message(body)
    if status == 503 and message:
        return Reply(RETRYABLE, status, "ServiceUnavailable", message[:200])
    if status == 504 and message:
        return Reply(OTHER, status, DEADLINE, message[:200])
    return Reply(OTHER, status, "", (message or body.decode("utf-8", errors="replace"))[:200])


def classify_invoke(status: int, code: str, original_status: int | None, detail: str = "") -> Reply:
    """An InvokeEndpoint response (status 0: no HTTP response, `code` then names the client's exception)."""
    if status == 200 and not code:
        return Reply(ANSWER, status)
    retryable = code in RETRYABLE_CODES or (code == "ModelError" and original_status == 503)
    shown = f"{code} ({original_status})" if code == "ModelError" else code
    return Reply(RETRYABLE if retryable else OTHER, status, shown, detail[:200])


def counts(calls: Iterable[Call]) -> dict[str, int]:
    tally = {ANSWER: 0, RETRYABLE: 0, OTHER: 0}
    for call in calls:
        tally[call.outcome] = tally.get(call.outcome, 0) + 1
    return tally


def error_codes(calls: Iterable[Call]) -> dict[str, int]:
    """How many of each error code (answers left out), most frequent first."""
    tally: dict[str, int] = {}
    for call in calls:
        if call.outcome != ANSWER:
            key = call.reply.code or f"HTTP {call.reply.status}"
            tally[key] = tally.get(key, 0) + 1
    return dict(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))


def latency_summary(calls: Sequence[Call]) -> dict[str, float] | None:
    return summarize_ms([c.latency_s for c in calls]) if calls else None


def recovery_s(calls: Iterable[Call], fault_at: float) -> float | None:
    """From the fault to the first answer to a request sent at or after it; None if none came."""
    answered = [c.done for c in calls if c.outcome == ANSWER and c.due >= fault_at]
    return min(answered) - fault_at if answered else None


def in_flight_at(calls: Iterable[Call], t: float) -> list[Call]:
    """Requests sent before `t` and not yet complete at `t` (as their clients saw them)."""
    return [c for c in calls if c.due < t < c.done]


def summarize_overload(
    before: Sequence[Call], overload: Sequence[Call], after: Sequence[Call], timeout_s: float
) -> dict[str, Any]:
    """Shares and latencies of an overload run: `before`/`after` closed loops, `overload` the open loop.

    Admitted requests are those the server took on: answered, or cut at their deadline (504); refused ones got 503.
    Latencies are the clients': from each request's scheduled arrival, so client queueing and connecting count too.
    """
    answered = [c for c in overload if c.outcome == ANSWER]
    timed_out = [c for c in overload if c.reply.code == DEADLINE]
    refused = [c for c in overload if c.outcome == RETRYABLE]
    admitted = answered + timed_out
    total = len(overload)
    before_s, after_s = latency_summary(before), latency_summary(after)
    return {
        "requests": total,
        "admitted": len(admitted),
        "answered": len(answered),
        "timed_out_504": len(timed_out),
        "refused_503": len(refused),
        "other": total - len(admitted) - len(refused),
        "admitted_share": len(admitted) / total if total else 0.0,
        "refused_share": len(refused) / total if total else 0.0,
        "admitted_latency": latency_summary(admitted),
        "refused_latency": latency_summary(refused),
        "admitted_over_timeout_client_side": sum(1 for c in admitted if c.latency_s > timeout_s),
        "error_codes": error_codes(overload),
        "before": before_s,
        "after": after_s,
        "after_over_before_p50": after_s["p50_ms"] / before_s["p50_ms"] if before_s and after_s else None,
    }


# --- processes: memory, sessions, listening sockets (pure parsers + /proc readers) -------------------------------


def parse_vm_rss_kib(status_text: str) -> int:
    """VmRSS of a /proc/<pid>/status text, in KiB."""
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key == "VmRSS":
            return int(value.split()[0])
    raise ValueError("no VmRSS line (a kernel thread, or a process that has exited)")


def rss_kib(pid: int, proc: Path = Path("/proc")) -> int:
    return parse_vm_rss_kib((proc / str(pid) / "status").read_text())


def parse_session_id(stat_text: str) -> int:
    """The session id of a /proc/<pid>/stat line (the command name in parentheses may hold spaces)."""
    fields = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(fields[3])  # after the name: state, ppid, pgrp, session


@dataclass(frozen=True)
class Listener:
    host: str
    port: int
    inode: int
    pid: int = 0

    @property
    def loopback(self) -> bool:
        address = ipaddress.ip_address(self.host)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address.is_loopback


def _decode_address(hex_address: str) -> str:
    """/proc/net/tcp{,6} prints addresses as 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def parse_listeners(proc_net_tcp: str) -> list[Listener]:
    """The listening sockets (state 0A) of a /proc/net/tcp or /proc/net/tcp6 text."""
    listeners = []
    for line in proc_net_tcp.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10 or parts[3] != "0A":
            continue
        address, port = parts[1].rsplit(":", 1)
        listeners.append(Listener(_decode_address(address), int(port, 16), int(parts[9])))
    return listeners


def socket_inode(link: str) -> int | None:
    """The inode of a `socket:[12345]` fd link; None for anything else."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[len("socket:[") : -1])
    return None


def session_members(leaders: Iterable[int], proc: Path = Path("/proc")) -> set[int]:
    """`leaders` and every process in their sessions (the box starts each process in a session of its own)."""
    wanted = {pid for pid in leaders if pid}
    members = set(wanted)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError):
            if parse_session_id((entry / "stat").read_text()) in wanted:
                members.add(int(entry.name))
    return members


def listening_sockets(pids: Iterable[int], proc: Path = Path("/proc")) -> list[Listener]:
    """TCP listening sockets held by `pids` (what `ss -ltnp` shows for them), each with its pid."""
    owner: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in (proc / str(pid) / "fd").iterdir():
                with contextlib.suppress(OSError):
                    inode = socket_inode(os.readlink(fd))
                    if inode is not None:
                        owner[inode] = pid
    found = []
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for listener in parse_listeners((proc / "net" / table).read_text()):
                if listener.inode in owner:
                    found.append(Listener(listener.host, listener.port, listener.inode, owner[listener.inode]))
    return sorted(found, key=lambda item: (item.pid, item.port))


# --- load: clients and drivers ------------------------------------------------------------------------------------


Send = Callable[[], Reply]


class ServerClient:
    """POST /invocations to a serving process, one keep-alive connection per thread; never raises."""

    def __init__(self, port: int, body: bytes, timeout_s: float = 120.0) -> None:
        self.port = port
        self.body = body
        self.timeout_s = timeout_s
        self._local = threading.local()

    def post(self) -> tuple[int, bytes]:
        """(status, body); (0, the error) when no response came (the connection is dropped then)."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
            self._local.conn = conn
        try:
            conn.request("POST", "/invocations", self.body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            self._local.conn = None
            return 0, f"{type(exc).__name__}: {exc}".encode()

    def __call__(self) -> Reply:
        status, body = self.post()
        if status == 0:
            return Reply(OTHER, 0, "ConnectionError", body.decode(errors="replace")[:200])
        return classify_server(status, body)


def closed_loop(send: Send, count: int, clock: Callable[[], float] = time.perf_counter) -> list[Call]:
    """`count` requests, one after another."""
    calls = []
    for _ in range(count):
        sent = clock()
        reply = send()
        calls.append(Call(sent, clock(), reply))
    return calls


class OpenLoop:
    """Requests at a fixed arrival rate from a pool of threads, each recorded as a Call from its scheduled arrival
    (so a request that waits for a free thread shows that wait). Runs until `stop()` or `seconds` have passed.

    `wait(seconds)` waits until the next arrival (default: on the stop event, so `stop()` ends it at once); tests
    pass one that advances their clock instead.
    """

    def __init__(
        self,
        send: Send,
        rate_qps: float,
        workers: int,
        clock: Callable[[], float] = time.perf_counter,
        wait: Callable[[float], object] | None = None,
    ) -> None:
        if rate_qps <= 0:
            raise ValueError("rate_qps must be positive")
        self._send = send
        self._interval = 1.0 / rate_qps
        self._workers = max(1, workers)
        self._clock = clock
        self._calls: list[Call] = []
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None
        self.issued = 0
        self.in_flight = 0  # sent, not yet complete

    def _one(self, due: float) -> None:
        with self._changed:
            self.in_flight += 1
            self._changed.notify_all()
        reply = self._send()
        call = Call(due, self._clock(), reply)
        with self._changed:
            self.in_flight -= 1
            self._calls.append(call)
            self._changed.notify_all()

    def _schedule(self, seconds: float | None) -> None:
        started = self._clock()
        with ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="open-loop") as pool:
            index = 0
            while not self._stop.is_set():
                due = started + index * self._interval
                if seconds is not None and due >= started + seconds:
                    break
                delay = due - self._clock()
                if delay > 0:
                    self._wait(delay)
                    if self._stop.is_set():
                        break
                pool.submit(self._one, due)
                self.issued += 1
                index += 1
        # the pool has waited for every request sent

    def start(self, seconds: float | None = None) -> OpenLoop:
        self._thread = threading.Thread(target=self._schedule, args=(seconds,), name="open-loop", daemon=True)
        self._thread.start()
        return self

    def wait_for(self, predicate: Callable[[list[Call]], bool], timeout_s: float = HANG_GUARD_S) -> bool:
        """Block until `predicate(calls so far)` holds (checked whenever a request starts or ends; it may read
        `in_flight`); False after `timeout_s`."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._calls), timeout_s)

    def join(self) -> list[Call]:
        """Wait for the schedule to end (its duration, or `stop()`) and every request sent to finish."""
        if self._thread is not None:
            self._thread.join()
        with self._changed:
            return sorted(self._calls, key=lambda c: c.due)

    def stop(self) -> list[Call]:
        self._stop.set()
        return self.join()

    def run(self, seconds: float) -> list[Call]:
        return self.start(seconds).join()


def request_body(repeats: int = 8) -> bytes:
    """One question on the rainforest paragraph repeated `repeats` times (8: ~2,000 tokens, 7 model windows)."""
    from sagebox.demo_data import RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS

    context = " ".join([RAINFOREST_CONTEXT] * max(1, repeats))
    return json.dumps({"question": RAINFOREST_QUESTIONS[0], "context": context}).encode()


# --- 1. overload ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverloadPlan:
    timeout_s: int = 2  # SAGEMAKER_MODEL_SERVER_TIMEOUT of the server under test
    factor: float = 4.0  # arrival rate over the measured one-client capacity
    seconds: float = 20.0
    capacity_requests: int = 60
    recovery_requests: int = 30
    warmup_requests: int = 10
    context_repeats: int = 8


@dataclass
class OverloadRun:
    plan: OverloadPlan
    capacity_qps: float
    rate_qps: float
    warmup: list[Call]
    before: list[Call]
    overload: list[Call]
    after: list[Call]
    rss_before_kib: int
    rss_peak_kib: int
    rss_after_kib: int
    server_stats: dict[str, Any]
    workers: int

    def summary(self) -> dict[str, Any]:
        admission = self.server_stats.get("admission", {})
        return {
            "timeout_s": self.plan.timeout_s,
            "seconds": self.plan.seconds,
            "capacity_qps_one_client": self.capacity_qps,
            "offered_qps": self.rate_qps,
            "client_threads": self.workers,
            **summarize_overload(self.before, self.overload, self.after, self.plan.timeout_s),
            "rss_before_mib": self.rss_before_kib / 1024,
            "rss_peak_mib": self.rss_peak_kib / 1024,
            "rss_after_mib": self.rss_after_kib / 1024,
            "rss_after_over_before": self.rss_after_kib / self.rss_before_kib,
            "server_admission": {
                k: admission.get(k)
                for k in ("admitted", "refused_busy", "refused_before_tokenizing", "timed_out", "abandoned")
            },
        }


class RssSampler:
    """The peak VmRSS of a process, sampled every `every_s` on a thread until stopped."""

    def __init__(self, pid: int, every_s: float = 0.25) -> None:
        self.pid = pid
        self.every_s = every_s
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, ValueError):
                self.peak_kib = max(self.peak_kib, rss_kib(self.pid))
            self._stop.wait(self.every_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def client_threads(rate_qps: float, timeout_s: float) -> int:
    """Enough threads that no arrival waits for one: every admitted request may be in flight for a whole timeout,
    a refused one for much less (one extra second of arrivals covers those)."""
    return min(1024, max(8, math.ceil(rate_qps * (timeout_s + 1.0))))


def run_overload(
    model_dir: Path,
    log_dir: Path,
    plan: OverloadPlan = OverloadPlan(),
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> OverloadRun:
    from container import env as names
    from sagebox.errors import SageboxError
    from sagebox.local_server import LocalServer

    server_env = {names.MODEL_SERVER_TIMEOUT: str(plan.timeout_s), **(env or {})}
    body = request_body(plan.context_repeats)
    with LocalServer.start(model_dir, log_dir / "overload-server.log", env=server_env) as server:
        pid = server.process.pid
        send = ServerClient(server.port, body)
        warmup = closed_loop(send, plan.warmup_requests, clock)  # also teaches admission control the model's cost
        before = closed_loop(send, plan.capacity_requests, clock)
        refused = [c.reply for c in before if c.outcome != ANSWER]
        if refused:
            raise SageboxError(
                f"{len(refused)} of {len(before)} requests at one client were not answered (first: HTTP "
                f"{refused[0].status} {refused[0].detail}); shorten the request (--context-repeats) or raise --timeout"
            )
        wall = before[-1].done - before[0].due
        capacity = len(before) / wall if wall > 0 else 0.0
        rss_before = rss_kib(pid)
        rate = capacity * plan.factor
        workers = client_threads(rate, plan.timeout_s)
        with RssSampler(pid) as sampler:
            overload = OpenLoop(ServerClient(server.port, body), rate, workers, clock).run(plan.seconds)
        after = closed_loop(send, plan.recovery_requests, clock)
        rss_after = rss_kib(pid)
        stats = server.stats()
    peak = max(sampler.peak_kib, rss_after)
    return OverloadRun(
        plan, capacity, rate, warmup, before, overload, after, rss_before, peak, rss_after, stats, workers
    )  # fmt: skip


# --- 2. SIGTERM under load ------------------------------------------------------------------------------------------


@dataclass
class SigtermRun:
    in_flight: list[Call]  # the requests the server held when SIGTERM was sent
    before: list[Call]  # requests completed before it
    exit_code: int
    drain_s: float  # SIGTERM to process exit
    log_tail: list[str]
    probes: int  # /stats probes until the server held every outstanding request

    def summary(self) -> dict[str, Any]:
        return {
            "answered_before_sigterm": len(self.before),
            "in_flight_at_sigterm": len(self.in_flight),
            "in_flight_outcomes": counts(self.in_flight),
            "exit_code": self.exit_code,
            "drain_s": self.drain_s,
            "in_flight_latency": latency_summary(self.in_flight),
        }


class GatedClients:
    """Closed-loop clients that can be paused: once paused, no new request starts and the outstanding set only
    shrinks, so a probe can compare it with the server's own count."""

    def __init__(self, send: Send, clients: int, clock: Callable[[], float]) -> None:
        self._send = send
        self._clock = clock
        self.cond = threading.Condition()
        self.paused = False
        self.finished = False
        self.outstanding: dict[int, float] = {}  # request id -> sent
        self.calls: dict[int, Call] = {}
        self._next = 0
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]

    def _loop(self) -> None:
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.finished or not self.paused)
                if self.finished:
                    return
                rid, self._next = self._next, self._next + 1
                self.outstanding[rid] = self._clock()
            reply = self._send()
            with self.cond:
                self.calls[rid] = Call(self.outstanding.pop(rid), self._clock(), reply)
                self.cond.notify_all()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def set(self, *, paused: bool | None = None, finished: bool | None = None) -> None:
        with self.cond:
            if paused is not None:
                self.paused = paused
            if finished is not None:
                self.finished = finished
            self.cond.notify_all()

    def snapshot(self) -> frozenset[int]:
        with self.cond:
            return frozenset(self.outstanding)

    def wait_answers(self, count: int, timeout_s: float = HANG_GUARD_S) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: len(self.calls) >= count, timeout_s)

    def join(self) -> None:
        for thread in self._threads:
            thread.join()


def run_sigterm(
    model_dir: Path,
    log_dir: Path,
    clients: int = 4,
    context_repeats: int = 8,
    attempts: int = 50,
    clock: Callable[[], float] = time.perf_counter,
) -> SigtermRun:
    from sagebox.errors import SageboxError
    from sagebox.local_server import LocalServer

    server = LocalServer.spawn(model_dir, log_dir / "sigterm-server.log")
    try:
        server.wait_ready()
        send = ServerClient(server.port, request_body(context_repeats))
        closed_loop(send, 3, clock)
        gate = GatedClients(send, clients, clock)
        gate.start()
        held: frozenset[int] = frozenset()
        probes = 0
        for _ in range(attempts):
            with gate.cond:
                answered = len(gate.calls)
            gate.wait_answers(answered + 2 * clients)  # the load runs
            gate.set(paused=True)
            while not held:
                first = gate.snapshot()
                if not first:
                    break  # everything finished during the probe: run the load again
                probes += 1
                in_flight = server.stats().get("in_flight")
                # The server holds a subset of what the clients have outstanding; an unchanged set of the same
                # size means it holds all of it.
                if gate.snapshot() == first and in_flight == len(first):
                    held = first
            if held:
                break
            gate.set(paused=False)
        if not held:
            raise SageboxError(f"no moment with every outstanding request inside the server in {attempts} tries")
        sent_at = clock()
        server.process.send_signal(signal.SIGTERM)
        exit_code = server.process.wait(HANG_GUARD_S)
        drained = clock() - sent_at
        gate.set(finished=True)
        gate.join()
    finally:
        server.stop(timeout=10)
    return SigtermRun(
        [gate.calls[rid] for rid in sorted(held)],
        [c for rid, c in gate.calls.items() if rid not in held],
        exit_code,
        drained,
        server.log().splitlines()[-5:],
        probes,
    )


# --- 3. kill -9 of an endpoint's serving process ------------------------------------------------------------------


@dataclass(frozen=True)
class BoxUrls:
    """A running embedded AWS (process mode) and its runtime gateway."""

    aws_url: str
    gateway_url: str
    state_dir: Path
    region: str = "us-east-1"


def box_client(box: BoxUrls, service: str, **config: Any) -> Any:
    """A boto3 client of the box. sagebox.aws.client fixes botocore's retries at 3 (standard mode); here retries are
    off, so the benchmark sees every error a client would see before retrying."""
    import botocore.config

    from sagebox import aws

    options = aws.AwsOptions.for_box(box.region, box.aws_url, box.gateway_url)
    endpoint = box.gateway_url if service == "sagemaker-runtime" else box.aws_url
    return aws.session(options).client(
        service,
        endpoint_url=endpoint,
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}, **config),
    )


@contextlib.contextmanager
def embedded_box(state_dir: Path) -> Iterator[BoxUrls]:
    """An embedded AWS and gateway as `sagebox up` starts them (no stacks), stopped on exit."""
    from sagebox.box import processes
    from sagebox.box.state import BoxState
    from sagebox.box.up import start_embedded_aws, start_gateway

    state = BoxState()
    try:
        start_embedded_aws(state, state_dir)
        start_gateway(state, state_dir)
        yield BoxUrls(state.aws_url, state.gateway_url, state_dir, state.region)
    finally:
        for pid in (state.gateway_pid, state.aws_pid):
            if pid:
                processes.stop(pid, timeout=40)


ROLE = "arn:aws:iam::123456789012:role/SageboxExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:faults"
BUCKET = "sagebox-faults"


def deploy_endpoint(box: BoxUrls, name: str, tarball: Path, timeout_s: float = HANG_GUARD_S) -> None:
    """Model data into the box's S3, then CreateModel/EndpointConfig/Endpoint; returns once InService."""
    from botocore.exceptions import ClientError

    s3, sagemaker = box_client(box, "s3"), box_client(box, "sagemaker")
    with contextlib.suppress(ClientError):
        s3.create_bucket(Bucket=BUCKET)
    key = f"{name}/model.tar.gz"
    s3.upload_file(str(tarball), BUCKET, key)
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://{BUCKET}/{key}"},
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.c6i.xlarge",
        "InitialInstanceCount": 1,
    }
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    waiter = {"Delay": 1, "MaxAttempts": int(timeout_s)}
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=waiter)


def delete_endpoint(box: BoxUrls, name: str) -> None:
    sagemaker = box_client(box, "sagemaker")
    sagemaker.delete_endpoint(EndpointName=name)
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})


class Invoker:
    """InvokeEndpoint through the box's gateway with boto3 (retries off); never raises."""

    def __init__(self, box: BoxUrls, endpoint: str, body: bytes, pool: int = 32) -> None:
        self.client = box_client(box, "sagemaker-runtime", max_pool_connections=pool)
        self.endpoint = endpoint
        self.body = body

    def __call__(self) -> Reply:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.invoke_endpoint(
                EndpointName=self.endpoint, Body=self.body, ContentType="application/json"
            )
            data = response["Body"].read()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            original = exc.response.get("OriginalStatusCode")
            return classify_invoke(
                status, str(error.get("Code", "")), int(original) if original else None, str(error.get("Message", ""))
            )
        except BotoCoreError as exc:
            return classify_invoke(0, type(exc).__name__, None, str(exc))
        if not is_answer(data):
            return Reply(OTHER, 200, "NotAnAnswer", data[:200].decode(errors="replace"))
        return Reply(ANSWER, 200)


def serving_pids(state_dir: Path, endpoint: str) -> list[int]:
    from sagebox.box.reconciler import load_fleet

    variants = load_fleet(state_dir).get(endpoint, {}).get("variants", [])
    return [int(i["pid"]) for v in variants for i in v.get("instances", []) if i.get("pid")]


def restarts(state_dir: Path, endpoint: str) -> int:
    from sagebox.box.reconciler import load_fleet

    return sum(int(v.get("restarts", 0)) for v in load_fleet(state_dir).get(endpoint, {}).get("variants", []))


def poll(condition: Callable[[], bool], timeout_s: float = HANG_GUARD_S, every_s: float = 0.1) -> bool:
    """Until `condition()` holds (True) or `timeout_s` passed (False): waits for a state, orders nothing."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(every_s)
    return True


@dataclass
class KillRun:
    killed_pid: int
    replacement_pids: list[int]
    restarts_before: int
    restarts_after: int
    calls: list[Call]
    killed_at: float
    recovery_s: float | None
    rate_qps: float

    def summary(self) -> dict[str, Any]:
        after = [c for c in self.calls if c.due >= self.killed_at]
        return {
            "rate_qps": self.rate_qps,
            "requests": len(self.calls),
            "outcomes": counts(self.calls),
            "error_codes": error_codes(self.calls),
            "recovery_s": self.recovery_s,
            "in_flight_at_kill": len(in_flight_at(self.calls, self.killed_at)),
            "failed_after_kill": sum(1 for c in after if c.outcome != ANSWER),
            "restarts": self.restarts_after - self.restarts_before,
            "replacement_pid_differs": self.killed_pid not in self.replacement_pids,
        }


def run_kill(
    box: BoxUrls,
    endpoint: str,
    body: bytes,
    rate_qps: float = 20.0,
    warm_answers: int = 20,
    tail_answers: int = 20,
    clock: Callable[[], float] = time.perf_counter,
) -> KillRun:
    """SIGKILL the endpoint's serving process under an open-loop load; wait (bounded) for answers again."""
    from sagebox.errors import SageboxError

    [pid] = serving_pids(box.state_dir, endpoint)
    restarts_before = restarts(box.state_dir, endpoint)
    load = OpenLoop(Invoker(box, endpoint, body), rate_qps, workers=16, clock=clock)
    load.start()
    killed_at = math.inf
    try:
        # Kill while a request is out, so that one meets the dying process (or the gateway's dead route).
        warm = load.wait_for(
            lambda calls: sum(c.outcome == ANSWER for c in calls) >= warm_answers and load.in_flight > 0
        )
        if not warm:
            raise SageboxError(f"endpoint {endpoint} gave no {warm_answers} answers before the kill")
        killed_at = clock()
        os.kill(pid, signal.SIGKILL)
        recovered = load.wait_for(lambda calls: recovery_s(calls, killed_at) is not None)
        if recovered:
            load.wait_for(lambda calls: sum(c.outcome == ANSWER and c.due >= killed_at for c in calls) >= tail_answers)
    finally:
        calls = load.stop()
    # The control plane routes to a replacement as soon as it starts and records the restart in fleet.json once the
    # replacement is healthy: wait for that record.
    poll(lambda: restarts(box.state_dir, endpoint) > restarts_before and serving_pids(box.state_dir, endpoint) != [pid])
    replacement = serving_pids(box.state_dir, endpoint)
    return KillRun(
        pid, replacement, restarts_before, restarts(box.state_dir, endpoint), calls, killed_at,
        recovery_s(calls, killed_at), rate_qps,
    )  # fmt: skip


# --- 4. the embedded AWS killed: `sagebox status`, `sagebox up` ---------------------------------------------------


CliRunner = Callable[[Sequence[str], Path], "subprocess.CompletedProcess[str]"]


def sagebox_cli(args: Sequence[str], state_dir: Path) -> subprocess.CompletedProcess[str]:
    """The `sagebox` command as a user runs it, on the box kept in `state_dir`."""
    from sagebox.paths import REPO, STATE_ENV

    env = {**os.environ, STATE_ENV: str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "sagebox", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )


def one_line(text: str) -> str:
    """Output with its wrapping undone (rich wraps long lines to the console width)."""
    return " ".join(text.split())


@dataclass
class RestartRun:
    up_s: float
    up_again_s: float
    status_after_kill: subprocess.CompletedProcess[str]
    endpoint_status_after: str
    answered_after: bool
    listeners: list[Listener]  # of the first box
    listeners_after: list[Listener]  # of the recovered box
    roles: dict[str, list[int]]  # the first box's processes: embedded AWS, gateway, serving
    roles_after: dict[str, list[int]]  # the recovered box's

    @property
    def status_says_not_running(self) -> bool:
        return "is not running" in one_line(self.status_after_kill.stdout)

    def summary(self) -> dict[str, Any]:
        return {
            "up_s": self.up_s,
            "up_again_s": self.up_again_s,
            "status_exit_code": self.status_after_kill.returncode,
            "status_says_not_running": self.status_says_not_running,
            "endpoint_status_after_up": self.endpoint_status_after,
            "answered_after_up": self.answered_after,
            "box_processes": self.roles,
            "listening": [f"{item.host}:{item.port} (pid {item.pid})" for item in self.listeners],
            "listening_after_up": [f"{item.host}:{item.port} (pid {item.pid})" for item in self.listeners_after],
            "all_on_loopback": all(item.loopback for item in [*self.listeners, *self.listeners_after]),
        }


def box_roles(state_dir: Path) -> dict[str, list[int]]:
    """The pids of the box in `state_dir` by role: embedded AWS, gateway, registry (containers mode), serving."""
    from sagebox.box.reconciler import load_fleet
    from sagebox.box.state import load_state

    state = load_state(state_dir)
    roles = {"embedded AWS": [state.aws_pid], "gateway": [state.gateway_pid]} if state else {}
    if state and state.registry_pid:
        roles["registry"] = [state.registry_pid]
    roles["serving"] = sorted(
        int(i["pid"])
        for entry in load_fleet(state_dir).values()
        for variant in entry.get("variants", [])
        for i in variant.get("instances", [])
        if i.get("pid")
    )
    return roles


def box_listeners(roles: Mapping[str, Sequence[int]]) -> list[Listener]:
    """The listening sockets of every process of a box: its processes and whatever runs in their sessions."""
    return listening_sockets(session_members(pid for pids in roles.values() for pid in pids))


def wait_gone(pid: int, timeout_s: float = 60.0) -> bool:
    """Until `pid` no longer exists. A killed process lingers as a zombie until its parent reaps it (here init, which
    took ~2 s), and sagebox.box.processes.alive() counts a zombie as running."""
    from sagebox.box import processes

    return poll(lambda: not processes.alive(pid), timeout_s, every_s=0.05)


def run_restart(
    models_dir: Path,
    state_dir: Path,
    target: str,
    body: bytes,
    cli: CliRunner = sagebox_cli,
    clock: Callable[[], float] = time.perf_counter,
) -> RestartRun:
    """`sagebox up`, SIGKILL of its embedded AWS, `sagebox status`, `sagebox up` again; the box is taken down."""
    from sagebox.box.state import load_state
    from sagebox.errors import SageboxError

    up = ["up", "--targets", target, "--models", str(models_dir)]
    endpoint = f"sagebox-{target}"
    try:
        started = clock()
        first = cli(up, state_dir)
        up_s = clock() - started
        if first.returncode != 0:
            raise SageboxError(f"sagebox up failed: {one_line(first.stderr or first.stdout)[-300:]}")
        state = load_state(state_dir)
        assert state is not None
        roles = box_roles(state_dir)
        listeners = box_listeners(roles)
        os.kill(state.aws_pid, signal.SIGKILL)
        if not wait_gone(state.aws_pid):
            raise SageboxError(f"the embedded AWS (pid {state.aws_pid}) did not exit after SIGKILL")
        status = cli(["status"], state_dir)
        started = clock()
        again = cli(up, state_dir)
        up_again_s = clock() - started
        if again.returncode != 0:
            raise SageboxError(f"sagebox up after the kill failed: {one_line(again.stderr or again.stdout)[-300:]}")
        recovered = load_state(state_dir)
        assert recovered is not None
        urls = BoxUrls(recovered.aws_url, recovered.gateway_url, state_dir, recovered.region)
        described = box_client(urls, "sagemaker").describe_endpoint(EndpointName=endpoint)
        answered = Invoker(urls, endpoint, body)().outcome == ANSWER
        roles_after = box_roles(state_dir)
        listeners_after = box_listeners(roles_after)
    finally:
        cli(["down"], state_dir)
    return RestartRun(
        up_s, up_again_s, status, str(described["EndpointStatus"]), answered, listeners, listeners_after, roles,
        roles_after,
    )  # fmt: skip


# --- the benchmark ----------------------------------------------------------------------------------------------


def package_for_box(model_dir: Path, out: Path) -> tuple[Path, str]:
    """(folder holding <variant>/model.tar.gz, the target that deploys it) for `model_dir`."""
    from container.manifest import load_verified
    from sagebox.pipeline.package import package_model_dir

    variant = load_verified(model_dir).variant
    target = TARGET_OF_VARIANT.get(variant)
    if target is None:
        from sagebox.errors import SageboxError

        raise SageboxError(f"no box target for a {variant!r} model (known: {', '.join(TARGET_OF_VARIANT)})")
    package_model_dir(model_dir, out / variant / "model.tar.gz")
    return out, target


SCENARIOS = ("overload", "sigterm", "kill", "restart")


def main(argv: list[str] | None = None) -> int:
    from sagebox.bench.machine import CpuSnapshot, cpu_info, load_between
    from sagebox.paths import state_dir

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=state_dir() / "bench" / "faults.json")
    parser.add_argument("--model-dir", type=Path, help="the model to serve (default: the tiny random BERT, ONNX FP32)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated of {', '.join(SCENARIOS)}")
    parser.add_argument("--timeout", type=int, default=2, help="SAGEMAKER_MODEL_SERVER_TIMEOUT for the overload")
    parser.add_argument("--factor", type=float, default=4.0, help="overload arrival rate over capacity")
    parser.add_argument("--seconds", type=float, default=20.0, help="overload duration")
    parser.add_argument(
        "--context-repeats", type=int, default=8, help="rainforest paragraphs per overload/SIGTERM request (default 8)"
    )
    parser.add_argument("--kill-rate", type=float, default=20.0, help="requests per second during the kill -9")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")

    from sagebox.pipeline.demo_models import tiny_fp32_dir

    model_dir = args.model_dir or tiny_fp32_dir()
    cpus = os.cpu_count() or 1
    report: dict[str, Any] = {
        "command": " ".join(["python scripts/bench_faults.py", *(sys.argv[1:] if argv is None else argv)]),
        "machine": {"cpu": cpu_info(), "platform": platform.platform(), "python": platform.python_version()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model_dir": str(model_dir),
        "request_context_repeats": args.context_repeats,
    }

    @contextlib.contextmanager
    def scenario(name: str) -> Iterator[dict[str, Any]]:
        """The scenario's summary goes into the report with how busy the machine was meanwhile."""
        figures: dict[str, Any] = {}
        start = CpuSnapshot.take()
        yield figures
        figures["machine_load"] = load_between(start, CpuSnapshot.take(), cpus)
        report[name] = figures

    with tempfile.TemporaryDirectory(prefix="sagebox-faults-") as tmp:
        work = Path(tmp)
        if "overload" in only:
            with scenario("overload") as figures:
                plan = OverloadPlan(args.timeout, args.factor, args.seconds, context_repeats=args.context_repeats)
                figures.update(run_overload(model_dir, work, plan).summary())
            print(_overload_line(figures))
        if "sigterm" in only:
            with scenario("sigterm") as figures:
                figures.update(run_sigterm(model_dir, work, context_repeats=args.context_repeats).summary())
            print(
                f"SIGTERM with {figures['in_flight_at_sigterm']} requests in flight: {figures['in_flight_outcomes']}, "
                f"exit {figures['exit_code']} {figures['drain_s']:.2f} s after the signal"
            )
        light = request_body(1)  # one paragraph: the box's load stays well under one serving process's capacity
        if "kill" in only or "restart" in only:
            models, target = package_for_box(model_dir, work / "models")
        if "kill" in only:
            with scenario("kill") as figures, embedded_box(work / "box") as box:
                deploy_endpoint(box, "faults-kill", next(models.glob("*/model.tar.gz")))
                figures.update(run_kill(box, "faults-kill", light, rate_qps=args.kill_rate).summary())
            recovery = figures["recovery_s"]
            print(
                f"kill -9 of the serving process at {figures['rate_qps']:.0f} QPS: answers again after "
                f"{'never' if recovery is None else f'{recovery:.2f} s'}; {figures['outcomes']} "
                f"({figures['error_codes']})"
            )
        if "restart" in only:
            with scenario("restart") as figures:
                figures.update(run_restart(models, work / "restart-state", target, light).summary())
            print(
                f"embedded AWS killed: `sagebox status` says it is not running: {figures['status_says_not_running']}; "
                f"`sagebox up` again {figures['up_again_s']:.1f} s (the first {figures['up_s']:.1f} s) -> "
                f"{figures['endpoint_status_after_up']}; every box socket on loopback: {figures['all_on_loopback']}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {args.out}")
    return 0


def _overload_line(o: dict[str, Any]) -> str:
    admitted, refused = o["admitted_latency"] or {}, o["refused_latency"] or {}
    return (
        f"overload x{o['offered_qps'] / o['capacity_qps_one_client']:.0f} ({o['offered_qps']:.1f} QPS over "
        f"{o['capacity_qps_one_client']:.1f}) for {o['seconds']:.0f} s, timeout {o['timeout_s']} s: "
        f"admitted {o['admitted_share']:.0%} (P50 {admitted.get('p50_ms', 0):.0f} / P99 "
        f"{admitted.get('p99_ms', 0):.0f} ms; {o['timed_out_504']} cut at the deadline), refused 503 "
        f"{o['refused_share']:.0%} (P50 {refused.get('p50_ms', 0):.1f} / P99 {refused.get('p99_ms', 0):.1f} ms), "
        f"other {o['other']}; RSS {o['rss_before_mib']:.0f} -> {o['rss_after_mib']:.0f} MiB (peak "
        f"{o['rss_peak_mib']:.0f}); P50 right after / before x{o['after_over_before_p50']:.2f}"
    )


if __name__ == "__main__":
    sys.exit(main())
