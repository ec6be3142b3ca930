"""Scenario: a retry storm. One serving process is measured at its capacity (one client, closed loop), then
`clients` closed-loop clients each send a request, and another the moment an answer or a refusal comes back (what a
client that ignores Retry-After does), for `seconds`.

The pinned layout (the default when this process may use two CPUs or more): the server on the first CPU with one
intra-op thread, the load generator on the others, so the clients' own Python does not take the server's CPU and
what is measured is what the storm costs the server.

Reported: goodput (answers that reached their client within the timeout) against the unloaded capacity over the
same time, server 504s and late answers, refusals' latency, a lone request's P50 before and after, RSS before and
after, and the CPU the server's threads used: the inference thread's share, and the HTTP thread's cost of one
refusal and of one answered request's HTTP work (tokenizing and answering included).
"""

from __future__ import annotations

import http.client
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.faults.load import request_body
from sagebox.bench.faults.procfs import rss_kib
from sagebox.bench.stats import summarize_ms

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class StormPlan:
    timeout_s: int = 2
    clients: int = 48
    seconds: float = 15.0
    capacity_seconds: float = 5.0
    warmup_requests: int = 20
    lone_requests: int = 30
    context_repeats: int = 2  # ~2,000 characters of context
    pinned: bool = True


def thread_cpu_s(pid: int, proc: Path = Path("/proc")) -> tuple[float, float]:
    """(the main thread's CPU seconds, every other thread's) of process `pid`, from /proc/<pid>/task/*/stat."""
    main = others = 0.0
    for task in (proc / str(pid) / "task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        seconds = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        if task.name == str(pid):
            main += seconds
        else:
            others += seconds
    return main, others


def cpu_split(cpus: set[int], pinned: bool) -> tuple[set[int], set[int]] | None:
    """(server CPUs, client CPUs) for the pinned layout, or None when it cannot be had (one CPU, or not asked)."""
    if not pinned or len(cpus) < 2:
        return None
    ordered = sorted(cpus)
    return {ordered[0]}, set(ordered[1:])


@contextmanager
def affinity(cpus: set[int] | None) -> Iterator[None]:
    """This thread on `cpus` inside the block (processes and threads started there inherit it), as before after."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


class Client:
    """One keep-alive connection; post() -> (status, sent, done), status 0 when no response came."""

    def __init__(self, port: int, body: bytes, clock: Callable[[], float]) -> None:
        self.port, self.body, self.clock = port, body, clock
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def post(self) -> tuple[int, float, float]:
        sent = self.clock()
        try:
            self.conn.request("POST", "/invocations", self.body, {"Content-Type": "application/json"})
            response = self.conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            status = 0
        return status, sent, self.clock()


def storm(
    port: int, body: bytes, clients: int, seconds: float, clock: Callable[[], float]
) -> list[tuple[int, float, float]]:
    """`clients` threads, each sending its next request as soon as the last came back, for `seconds`."""
    stop = clock() + seconds
    results: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def one() -> None:
        client, mine = Client(port, body, clock), []
        while clock() < stop:
            mine.append(client.post())
        client.conn.close()
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=one, name=f"storm-{i}") for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def lone(port: int, body: bytes, count: int, clock: Callable[[], float]) -> list[float]:
    client = Client(port, body, clock)
    latencies = []
    for _ in range(count):
        status, sent, done = client.post()
        if status == 200:
            latencies.append(done - sent)
    client.conn.close()
    return latencies


def summarize_storm(
    plan: StormPlan,
    capacity_qps: float,
    results: list[tuple[int, float, float]],
    wall_s: float,
    cpu: Mapping[str, float],
) -> dict[str, Any]:
    """The storm's figures (pure): `cpu` holds the HTTP and inference threads' CPU seconds in the unloaded phase
    and in the storm, with the unloaded phase's answer count."""
    answered = [(s, d) for status, s, d in results if status == 200]
    in_time = [1 for s, d in answered if d - s <= plan.timeout_s]
    refused = [d - s for status, s, d in results if status == 503]
    deadline = sum(1 for status, _, _ in results if status == 504)
    per_answer_http_s = cpu["unloaded_http_s"] / cpu["unloaded_answers"] if cpu["unloaded_answers"] else 0.0
    refusal_http_s = max(0.0, cpu["storm_http_s"] - per_answer_http_s * len(answered))
    return {
        "timeout_s": plan.timeout_s,
        "clients": plan.clients,
        "seconds": round(wall_s, 2),
        "capacity_qps": round(capacity_qps, 2),
        "requests": len(results),
        "answered": len(answered),
        "answered_in_time": len(in_time),
        "goodput_over_capacity": round(len(in_time) / (capacity_qps * wall_s), 3) if capacity_qps else 0.0,
        "answered_late_client_side": len(answered) - len(in_time),
        "timed_out_504": deadline,
        "refused_503": len(refused),
        "other": len(results) - len(answered) - len(refused) - deadline,
        "refused_latency": summarize_ms(refused) if refused else {},
        "inference_cpu_share": round(cpu["storm_inference_s"] / wall_s, 3) if wall_s else 0.0,
        "http_cpu_share": round(cpu["storm_http_s"] / wall_s, 3) if wall_s else 0.0,
        "http_cpu_ms_per_answer": round(per_answer_http_s * 1000.0, 3),
        "http_cpu_ms_per_refusal": round(refusal_http_s / len(refused) * 1000.0, 4) if refused else None,
    }


def run_storm(
    model_dir: Path,
    log_dir: Path,
    plan: StormPlan = StormPlan(),
    env: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Warm-up, capacity at one client, the storm, a lone client again; the server is stopped on return."""
    from container import env as names
    from sagebox.local_server import LocalServer

    split = cpu_split(os.sched_getaffinity(0), plan.pinned)
    server_env = {names.MODEL_SERVER_TIMEOUT: str(plan.timeout_s), **(env or {})}
    if split is not None:
        server_env.setdefault(names.INTRA_OP_THREADS, str(len(split[0])))
    body = request_body(plan.context_repeats)
    with affinity(split[0] if split else None):
        server = LocalServer.spawn(model_dir, log_dir / "storm-server.log", env=server_env)
    try:
        with affinity(split[1] if split else None):
            server.wait_ready()
            pid = server.process.pid
            lone(server.port, body, plan.warmup_requests, clock)  # also teaches admission control the model's cost
            http0, _ = thread_cpu_s(pid)
            started = clock()
            before = []
            client = Client(server.port, body, clock)
            while clock() - started < plan.capacity_seconds:
                status, sent, done = client.post()
                if status == 200:
                    before.append(done - sent)
            capacity_wall = clock() - started
            client.conn.close()
            http1, inference1 = thread_cpu_s(pid)
            rss_before = rss_kib(pid)
            started = clock()
            results = storm(server.port, body, plan.clients, plan.seconds, clock)
            wall = clock() - started
            http2, inference2 = thread_cpu_s(pid)
            time.sleep(1.0)  # the storm's last refusals drain
            after = lone(server.port, body, plan.lone_requests, clock)
            rss_after = rss_kib(pid)
    finally:
        server.stop()
    cpu = {
        "unloaded_http_s": http1 - http0,
        "unloaded_answers": len(before),
        "storm_http_s": http2 - http1,
        "storm_inference_s": inference2 - inference1,
    }
    figures = summarize_storm(plan, len(before) / capacity_wall, results, wall, cpu)
    before_p50 = summarize_ms(before)["p50_ms"]
    after_p50 = summarize_ms(after)["p50_ms"] if after else None
    figures.update(
        {
            "layout": {"server_cpus": sorted(split[0]), "client_cpus": sorted(split[1])} if split else "shared",
            "lone_p50_ms_before": before_p50,
            "lone_p50_ms_after": after_p50,
            "after_over_before_p50": round(after_p50 / before_p50, 3) if after_p50 else None,
            "rss_before_mib": rss_before / 1024,
            "rss_after_mib": rss_after / 1024,
            "rss_after_over_before": round(rss_after / rss_before, 3),
        }
    )
    return figures
