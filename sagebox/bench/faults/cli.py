"""Fault benchmark: what clients see when a serving process is overloaded, stopped or killed, or when the box's
embedded AWS dies, measured on real processes.

    .venv/bin/python scripts/bench_faults.py [--out .sagebox/bench/faults.json] [--model-dir DIR]
                                             [--only overload,storm,sigterm,kill,restart] [--timeout 2]
                                             [--seconds 20] [--storm-clients 48] [--shared]

1. overload: one serving process (`python -m container serve`, SAGEMAKER_MODEL_SERVER_TIMEOUT short) is first
   measured at its capacity (closed loop, one client: QPS, P50/P99), then driven at 4x that QPS for 20 s (open
   loop: latency counts from each request's scheduled arrival, so client-side queueing is not hidden). Reported:
   admitted and refused (503) shares, refused-response and admitted latency, admitted requests the server cut at
   their deadline (504), the server's RSS before, at peak and after, and the latency of a closed loop right after
   the overload against the one before (recovery).
   Pinned (the default; --shared for all on the same CPUs): the server on the first CPU with one intra-op thread,
   the load generator on the others.
2. storm: a retry storm (sagebox/bench/faults/storm.py): --storm-clients closed-loop clients, each sending again the
   moment an answer or a refusal comes back, pinned as the overload is. Reported: goodput (answers within the
   timeout at the client) against the unloaded capacity, 504s and late answers, refusals' latency, the inference
   thread's CPU share, the HTTP thread's CPU per refusal and per answer, a lone request's P50 before and after.
3. sigterm: clients in a closed loop; once the server confirms (its /stats `in_flight`) that it holds every request
   the clients have outstanding, SIGTERM: every one of those requests must be answered, the exit must be clean.
4. kill: an endpoint in an embedded AWS (process mode) under an open-loop load through boto3's sagemaker-runtime
   client (botocore retries off, so every error is seen); SIGKILL its serving process while a request is out (the
   benchmark waits for one); every response is an answer
   or a retryable error (ServiceUnavailable, ModelError with the container's 503, throttling); recovery time is from
   the kill to the first answer to a request sent after it.
5. restart: `sagebox up` (one target, the model packaged), then SIGKILL of its embedded AWS: `sagebox status` must
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
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sagebox.bench.faults.box import deploy_endpoint, embedded_box, package_for_box
from sagebox.bench.faults.kill import run_kill
from sagebox.bench.faults.load import request_body
from sagebox.bench.faults.overload import OverloadPlan, run_overload
from sagebox.bench.faults.report import (
    kill_line,
    new_report,
    overload_line,
    restart_line,
    scenario,
    sigterm_line,
    storm_line,
    write_report,
)
from sagebox.bench.faults.restart import run_restart
from sagebox.bench.faults.sigterm import run_sigterm
from sagebox.bench.faults.storm import StormPlan, run_storm

SCENARIOS = ("overload", "storm", "sigterm", "kill", "restart")


def parser(default_out: Path) -> argparse.ArgumentParser:
    """The command line; its description is this module's docstring, so `--help` explains every scenario."""
    options = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--out", type=Path, default=default_out)
    options.add_argument("--model-dir", type=Path, help="the model to serve (default: the tiny random BERT, ONNX FP32)")
    options.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated of {', '.join(SCENARIOS)}")
    options.add_argument("--timeout", type=int, default=2, help="SAGEMAKER_MODEL_SERVER_TIMEOUT for the overload")
    options.add_argument("--factor", type=float, default=4.0, help="overload arrival rate over capacity")
    options.add_argument("--seconds", type=float, default=20.0, help="overload duration")
    options.add_argument(
        "--context-repeats", type=int, default=8, help="rainforest paragraphs per overload/SIGTERM request (default 8)"
    )
    options.add_argument("--kill-rate", type=float, default=20.0, help="requests per second during the kill -9")
    options.add_argument("--storm-clients", type=int, default=48, help="closed-loop clients of the retry storm")
    options.add_argument(
        "--shared",
        action="store_true",
        help="overload and storm with server and clients on the same CPUs (default: "
        "pinned, the server on the first CPU with one intra-op thread, the clients on the others)",
    )
    return options


def command_line(argv: Sequence[str] | None) -> str:
    """The command as the results show it: the script and the arguments it was given."""
    return " ".join(["python scripts/bench_faults.py", *(sys.argv[1:] if argv is None else argv)])


def run_scenarios(args: argparse.Namespace, only: Sequence[str], model_dir: Path, report: dict[str, Any]) -> None:
    """Each scenario of `only`, in the order of SCENARIOS, its figures into `report` and its line printed; every
    server and box it starts works under one temporary folder, removed at the end."""
    cpus = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="sagebox-faults-") as tmp:
        work = Path(tmp)
        if "overload" in only:
            with scenario(report, "overload", cpus) as figures:
                plan = OverloadPlan(
                    args.timeout,
                    args.factor,
                    args.seconds,
                    context_repeats=args.context_repeats,
                    pinned=not args.shared,
                )
                figures.update(run_overload(model_dir, work, plan).summary())
            print(overload_line(figures))
        if "storm" in only:
            with scenario(report, "storm", cpus) as figures:
                storm_plan = StormPlan(args.timeout, args.storm_clients, args.seconds, pinned=not args.shared)
                figures.update(run_storm(model_dir, work, storm_plan))
            print(storm_line(figures))
        if "sigterm" in only:
            with scenario(report, "sigterm", cpus) as figures:
                figures.update(run_sigterm(model_dir, work, context_repeats=args.context_repeats).summary())
            print(sigterm_line(figures))
        light = request_body(1)  # one paragraph: the box's load stays well under one serving process's capacity
        if "kill" in only or "restart" in only:
            models, target = package_for_box(model_dir, work / "models")
        if "kill" in only:
            with scenario(report, "kill", cpus) as figures, embedded_box(work / "box") as box:
                deploy_endpoint(box, "faults-kill", next(models.glob("*/model.tar.gz")))
                figures.update(run_kill(box, "faults-kill", light, rate_qps=args.kill_rate).summary())
            print(kill_line(figures))
        if "restart" in only:
            with scenario(report, "restart", cpus) as figures:
                figures.update(run_restart(models, work / "restart-state", target, light).summary())
            print(restart_line(figures))


def main(argv: list[str] | None = None) -> int:
    from sagebox.paths import state_dir

    options = parser(state_dir() / "bench" / "faults.json")
    args = options.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        options.error(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")

    from sagebox.demo.models import tiny_fp32_dir

    model_dir = args.model_dir or tiny_fp32_dir()
    report = new_report(command_line(argv), model_dir, args.context_repeats)
    run_scenarios(args, only, model_dir, report)
    write_report(report, args.out)
    print(f"results: {args.out}")
    return 0
