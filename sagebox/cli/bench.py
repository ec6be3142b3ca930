"""`sagebox bench`: the reference workflow's comparison table for endpoints of any task (local box or a real
account)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from sagebox.errors import SageboxError

CLOUD_QUERIES = 10_000
DEMO_QUERIES = 400


def build_parser_defaults() -> argparse.Namespace:
    """The bench command's options at their defaults (for `sagebox demo`)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="benchmark endpoints: P50/P90/P99, QPS, $ per million queries, accuracy of each task"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--endpoint",
        action="append",
        metavar="NAME=INSTANCE_TYPE[:VARIANT[:TASK]]",
        help="a real endpoint and its instance type, its variant and its task (default question-answering) "
        "(repeatable); default: every endpoint of the local box",
    )
    p.add_argument("--targets", help="local box targets to benchmark (comma-separated; default: all)")
    p.add_argument(
        "--queries", type=int, help=f"requests per endpoint (default {CLOUD_QUERIES:,}; local box {DEMO_QUERIES})"
    )
    p.add_argument("--concurrency", type=int, default=1, help="clients in flight per endpoint (default 1)")
    p.add_argument("--rate", type=float, help="fixed arrival rate in QPS (open loop) instead of a closed loop")
    p.add_argument("--max-seconds", type=float, default=3600.0, help="stop after this long (default 3600)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured requests per endpoint first (default 5)")
    p.add_argument("--eval", type=Path, help="SQuAD v1.1 JSON whose questions are sent and scored (EM/F1)")
    p.add_argument(
        "--also-eval",
        type=Path,
        help="a second SQuAD v1.1 JSON, scored only (held-out EM/F1 columns; local box default: the hand-written "
        "held-out set tests/data/heldout/heldout_qa.json)",
    )
    p.add_argument(
        "--data",
        action="append",
        metavar="TASK=PATH",
        help="labelled requests for a text task's endpoints (repeatable), in the formats `sagebox build --eval` reads "
        "(feature-extraction: query/passage pairs, scored recall@10); default: the hand-made retrieval set for "
        "embeddings on the local box, else built-in text (timed, not scored)",
    )
    p.add_argument("--prices", type=Path, help="price table JSON (default: infra/data/prices.json)")
    p.add_argument("--baseline", help="row that relative $/performance compares against (default: first FP32 row)")
    p.add_argument("--out", type=Path, help="results folder (default .sagebox/bench/<time>)")
    p.add_argument("--region")
    p.add_argument("--profile")
    p.add_argument("--runtime-url", help="sagemaker-runtime endpoint URL (default: AWS's, or the local box's)")


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from infra.catalog import load_prices
    from sagebox.bench import report, session
    from sagebox.bench.endpoints import BenchPlan
    from sagebox.cli.common import console as make_console
    from sagebox.paths import state_dir
    from sagebox.pipeline.data.squad import load_squad
    from sagebox.runtime import connect

    if args.concurrency < 1 or (args.queries is not None and args.queries < 1):
        raise SageboxError("--queries and --concurrency must be at least 1")
    runtime = connect(args.region, args.profile, args.runtime_url, use_box=not args.endpoint)
    if args.endpoint:
        endpoints = session.parse_endpoints(args.endpoint)
    else:
        targets = [t.strip() for t in args.targets.split(",")] if args.targets else None
        endpoints = session.box_endpoints(runtime, targets)
    questions = (
        session.QuestionSet(str(args.eval), load_squad(args.eval))
        if args.eval
        else session.default_questions(runtime.local)
    )
    queries = args.queries or (DEMO_QUERIES if runtime.local else CLOUD_QUERIES)
    request = session.BenchRequest(
        runtime=runtime,
        endpoints=endpoints,
        questions=questions,
        plan=BenchPlan(queries, args.concurrency, args.rate, args.warmup, max_seconds=args.max_seconds),
        prices=load_prices(args.prices),
        out=args.out or state_dir() / "bench" / time.strftime("%Y%m%d-%H%M%S"),
        baseline=args.baseline,
        heldout=session.heldout_questions(args.also_eval, runtime.local),
        data=session.parse_data(getattr(args, "data", None)),
    )
    console = make_console()
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip
        tasks = {s.label: progress.add_task(f"bench {s.label}", total=queries) for s in endpoints}
        outcome = session.run(
            request, on_round=lambda label, done, total: progress.update(tasks[label], completed=done)
        )
    console.print(report.rich_table(outcome.rows, outcome.title))
    for note in outcome.notes:
        console.print(f"[dim]- {note}[/]")
    out = outcome.out
    console.print(f"results: {out}/results.json, {out}/latency_cdf.png, {out}/report.md")
    if outcome.errors:
        raise SageboxError(f"{len(outcome.errors)} request(s) failed; first: {outcome.errors[0]}")
    return 0
