"""Scenario 2, SIGTERM under load: clients in a closed loop; once the server confirms (its /stats `in_flight`) that
it holds every request the clients have outstanding, SIGTERM: every one of those requests must be answered, the
exit must be clean.

The signal waits for that confirmation so that what the drain must answer is known exactly: a request still on its
way to the server is outstanding for its client but not held by the server, and would make the count ambiguous.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.faults.load import Send, ServerClient, closed_loop, request_body
from sagebox.bench.faults.outcomes import Call, counts, latency_summary
from sagebox.bench.faults.waits import HANG_GUARD_S


@dataclass
class SigtermRun:
    """The requests the server held at the signal and those completed before it, the exit, the drain time, and the
    server's last log lines."""

    in_flight: list[Call]  # the requests the server held when SIGTERM was sent
    before: list[Call]  # requests completed before it
    exit_code: int
    drain_s: float  # SIGTERM to process exit
    log_tail: list[str]
    probes: int  # /stats probes until the server held every outstanding request

    def summary(self) -> dict[str, Any]:
        """The SIGTERM scenario's figures in the results JSON."""
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
        """Pause or resume new requests, or finish (each client returns after its outstanding request)."""
        with self.cond:
            if paused is not None:
                self.paused = paused
            if finished is not None:
                self.finished = finished
            self.cond.notify_all()

    def snapshot(self) -> frozenset[int]:
        """The ids of the requests outstanding now."""
        with self.cond:
            return frozenset(self.outstanding)

    def wait_answers(self, count: int, timeout_s: float = HANG_GUARD_S) -> bool:
        """Until `count` requests have completed (whatever their outcome); False after `timeout_s`."""
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
    """Load, pause, probe until the server holds every outstanding request (or resume and try again, `attempts`
    times), then SIGTERM and wait for the exit; the server is stopped on return whatever happened."""
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
