"""The fault benchmark's report: the results JSON (what ran where, then each scenario's figures with how busy the
machine was meanwhile) and the one line printed per scenario.

The machine's load is recorded per scenario because the figures depend on it: the load generator, the servers and
whatever else runs share the same CPUs (the published run had other work taking 0.6-1.1 of its 2).
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sagebox.bench.machine import CpuSnapshot, cpu_info, load_between


def new_report(command: str, model_dir: Path, context_repeats: int, started: str | None = None) -> dict[str, Any]:
    """The results' header: the command, the machine, when it started (now unless given), the model served."""
    return {
        "command": command,
        "machine": {"cpu": cpu_info(), "platform": platform.platform(), "python": platform.python_version()},
        "started": started or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model_dir": str(model_dir),
        "request_context_repeats": context_repeats,
    }


@contextlib.contextmanager
def scenario(
    report: dict[str, Any], name: str, cpus: int, snapshot: Callable[[], CpuSnapshot] = CpuSnapshot.take
) -> Iterator[dict[str, Any]]:
    """The scenario's summary goes into the report with how busy the machine was meanwhile (a scenario that fails
    leaves no entry: its exception ends the run)."""
    figures: dict[str, Any] = {}
    start = snapshot()
    yield figures
    figures["machine_load"] = load_between(start, snapshot(), cpus)
    report[name] = figures


def write_report(report: dict[str, Any], out: Path) -> None:
    """The results JSON at `out` (its folder made if missing)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


def overload_line(o: dict[str, Any]) -> str:
    """The overload scenario in one line: offered load, admitted and refused shares with their latencies, memory,
    and recovery (P50 right after over before)."""
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


def storm_line(o: dict[str, Any]) -> str:
    """The retry storm in one line: goodput against capacity, what was late, refusals, the CPU split."""
    refused = o["refused_latency"] or {}
    return (
        f"storm of {o['clients']} clients for {o['seconds']:.0f} s ({o['layout']}), timeout {o['timeout_s']} s: "
        f"{o['answered_in_time']} answered in time, {o['goodput_over_capacity']:.0%} of the unloaded "
        f"{o['capacity_qps']:.1f} QPS; {o['timed_out_504']} cut at the deadline, {o['answered_late_client_side']} "
        f"late; {o['refused_503']} refused (P50 {refused.get('p50_ms', 0):.1f} ms); model thread "
        f"{o['inference_cpu_share']:.0%} of the CPU, HTTP {o['http_cpu_ms_per_refusal']} ms per refusal and "
        f"{o['http_cpu_ms_per_answer']} ms per answer; lone P50 after / before x{o['after_over_before_p50']}"
    )


def sigterm_line(figures: dict[str, Any]) -> str:
    """The SIGTERM scenario in one line: what the requests held at the signal got, the exit and how long it took."""
    return (
        f"SIGTERM with {figures['in_flight_at_sigterm']} requests in flight: {figures['in_flight_outcomes']}, "
        f"exit {figures['exit_code']} {figures['drain_s']:.2f} s after the signal"
    )


def kill_line(figures: dict[str, Any]) -> str:
    """The kill scenario in one line: the load, when answers came again, and what every request got."""
    recovery = figures["recovery_s"]
    return (
        f"kill -9 of the serving process at {figures['rate_qps']:.0f} QPS: answers again after "
        f"{'never' if recovery is None else f'{recovery:.2f} s'}; {figures['outcomes']} "
        f"({figures['error_codes']})"
    )


def restart_line(figures: dict[str, Any]) -> str:
    """The restart scenario in one line: what `sagebox status` said, both `up`s, the endpoint after, the sockets."""
    return (
        f"embedded AWS killed: `sagebox status` says it is not running: {figures['status_says_not_running']}; "
        f"`sagebox up` again {figures['up_again_s']:.1f} s (the first {figures['up_s']:.1f} s) -> "
        f"{figures['endpoint_status_after_up']}; every box socket on loopback: {figures['all_on_loopback']}"
    )
