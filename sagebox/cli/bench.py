"""`sagebox bench`: the reference workflow's comparison table for QA endpoints (local box or a real account)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError

CLOUD_QUERIES = 10_000
DEMO_QUERIES = 400


def build_parser_defaults() -> argparse.Namespace:
    """The bench command's options at their defaults (for `sagebox demo`)."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args([])


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark endpoints: P50/P90/P99, QPS, $ per million queries, EM/F1")
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--endpoint",
        action="append",
        metavar="NAME=INSTANCE_TYPE[:VARIANT]",
        help="a real endpoint and its instance type (repeatable); default: every endpoint of the local box",
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
    p.add_argument("--prices", type=Path, help="price table JSON (default: infra/data/prices.json)")
    p.add_argument("--baseline", help="row that relative $/performance compares against (default: first FP32 row)")
    p.add_argument("--out", type=Path, help="results folder (default .sagebox/bench/<time>)")
    p.add_argument("--region")
    p.add_argument("--profile")
    p.add_argument("--runtime-url", help="sagemaker-runtime endpoint URL (default: AWS's, or the local box's)")


def _endpoints(args: argparse.Namespace) -> tuple[list[Any], Any, bool]:
    """(endpoint specs, sagemaker-runtime client, local box?)."""
    from sagebox import aws
    from sagebox.bench.endpoints import EndpointSpec
    from sagebox.box.state import load_state
    from sagebox.paths import state_dir

    if args.endpoint:
        specs = []
        for raw in args.endpoint:
            name, sep, rest = raw.partition("=")
            instance_type, _, variant = rest.partition(":")
            if not sep or not name or not instance_type:
                raise SageboxError(f"--endpoint {raw!r}: expected NAME=INSTANCE_TYPE[:VARIANT]")
            specs.append(EndpointSpec(name, name, instance_type, variant or "?"))
        options = aws.AwsOptions.from_env(
            region=args.region, profile=args.profile, runtime_endpoint_url=args.runtime_url
        )
        return specs, aws.client(aws.session(options), "sagemaker-runtime", options), False
    box = load_state(state_dir())
    endpoints = _box_endpoints(box)
    if box is None or not endpoints:
        raise SageboxError("no endpoints: start the local box with `sagebox up`, or pass --endpoint NAME=INSTANCE_TYPE")
    wanted = [t.strip() for t in args.targets.split(",")] if args.targets else sorted(endpoints)
    unknown = [t for t in wanted if t not in endpoints]
    if unknown:
        raise SageboxError(f"the local box has no target(s) {', '.join(unknown)} (it has {', '.join(endpoints)})")
    specs = [
        EndpointSpec(t, endpoints[t].endpoint_name, endpoints[t].instance_type, endpoints[t].variant) for t in wanted
    ]
    options = aws.AwsOptions.for_box(box.region, box.aws_url, args.runtime_url or box.gateway_url)
    return specs, aws.client(aws.session(options), "sagemaker-runtime", options), True


def _box_endpoints(box: Any) -> dict[str, Any]:
    """The local box's InService endpoints by target (empty without a running box)."""
    from sagebox.box import processes
    from sagebox.box.inventory import list_endpoints
    from sagebox.box.up import box_clients
    from sagebox.paths import state_dir

    if box is None or not (box.aws_pid and processes.alive(box.aws_pid)):
        return {}
    (sagemaker,) = box_clients(box, "sagemaker")
    return {t: e for t, e in list_endpoints(box, state_dir(), sagemaker).items() if e.status == "InService"}


def _questions(args: argparse.Namespace, local: bool) -> tuple[list[Any], str]:
    from sagebox.pipeline.squad import GoldAnswer, QAExample, load_squad

    if args.eval:
        return load_squad(args.eval), str(args.eval)
    if local:
        from sagebox.pipeline.demo_models import minilm_squad

        demo = minilm_squad()
        return load_squad(demo.dev_data), f"{demo.dev_data} (the demo model's held-out questions)"
    from sagebox.demo_data import RAINFOREST_ANSWERS, RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS

    examples = [
        QAExample(
            f"rainforest-{i}", q, RAINFOREST_CONTEXT, tuple(GoldAnswer(a, RAINFOREST_CONTEXT.find(a)) for a in golds)
        )
        for i, (q, golds) in enumerate(zip(RAINFOREST_QUESTIONS, RAINFOREST_ANSWERS, strict=True))
    ]
    return examples, "the reference workflow's Amazon rainforest questions"


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from infra.catalog import load_prices
    from sagebox.bench import report
    from sagebox.bench.endpoints import BenchPlan, run_benchmark, table_rows
    from sagebox.cli.common import console as make_console
    from sagebox.paths import state_dir
    from sagebox.pipeline.squad_metric import score

    if args.concurrency < 1 or (args.queries is not None and args.queries < 1):
        raise SageboxError("--queries and --concurrency must be at least 1")
    prices = load_prices(args.prices)
    specs, runtime, local = _endpoints(args)
    questions, source = _questions(args, local)
    queries = args.queries or (DEMO_QUERIES if local else CLOUD_QUERIES)
    plan = BenchPlan(queries, args.concurrency, args.rate, args.warmup, max_seconds=args.max_seconds)
    console = make_console()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        tasks = {s.label: progress.add_task(f"bench {s.label}", total=queries) for s in specs}
        results = run_benchmark(
            runtime,
            specs,
            questions,
            plan,
            on_round=lambda label, done, total: progress.update(tasks[label], completed=done),
        )
    accuracy = {}
    for result in results:
        asked = [q for q in questions if q.id in result.predictions]
        if asked:
            s = score(asked, result.predictions)
            accuracy[result.spec.label] = (s.exact_match, s.f1)
    baseline = args.baseline or next((s.label for s in specs if s.variant == "fp32"), specs[0].label)
    rows = table_rows(results, prices, baseline, accuracy)
    notes = _notes(results, local, source, prices) + _neuron_estimates(specs, local)
    title = f"Sagebox benchmark: {queries} requests per endpoint, concurrency {args.concurrency}"
    console.print(report.rich_table(rows, title))
    for note in notes:
        console.print(f"[dim]- {note}[/]")
    out = args.out or state_dir() / "bench" / time.strftime("%Y%m%d-%H%M%S")
    meta = {
        "started": started,
        "queries": queries,
        "concurrency": args.concurrency,
        "rate_qps": args.rate,
        "questions": source,
        "local_box": local,
        "prices_source": prices.source,
        "prices_region": prices.region,
        "prices_as_of": prices.as_of,
    }
    latencies = {r.spec.label: [v * 1000 for v in r.latencies_s] for r in results}
    report.write_json(out / "results.json", {"meta": meta, "rows": rows, "notes": notes, "latencies_ms": latencies})
    report.write_cdf_png(out / "latency_cdf.png", latencies, title)
    report.write_atomic(out / "report.md", report.markdown(rows, meta, notes).encode())
    console.print(f"results: {out}/results.json, {out}/latency_cdf.png, {out}/report.md")
    failed = sum(len(r.errors) for r in results)
    if failed:
        raise SageboxError(f"{failed} request(s) failed; first: {next(e for r in results for e in r.errors)}")
    return 0


def _neuron_estimates(specs: list[Any], local: bool) -> list[str]:
    """The cost model's per-bucket estimate for each local neuron endpoint (read from its model directory)."""
    from neuron_emu.errors import NeuronEmuError
    from neuron_emu.qa import instance_estimate, read_plans
    from sagebox.box.state import load_state
    from sagebox.paths import state_dir

    endpoints = _box_endpoints(load_state(state_dir())) if local else {}
    notes = []
    for spec in specs:
        endpoint = endpoints.get(spec.label)
        if spec.variant != "neuron" or endpoint is None or not endpoint.model_dir:
            continue
        try:
            plans = read_plans(Path(endpoint.model_dir))
        except NeuronEmuError:
            continue
        parts = []
        for bucket, plan in sorted(plans.items()):
            row = instance_estimate(plan, spec.instance_type)
            if row:
                cost = f", ${row.usd_per_million:.4f}/1M" if row.usd_per_million is not None else ""
                parts.append(f"seq {bucket}: {row.latency_ms:.3f} ms{cost}")
        if parts:
            notes.append(
                f"{spec.label} on a real {spec.instance_type}, roofline estimate per inference (a lower bound: no "
                f"host transfer or launch overhead): {'; '.join(parts)}"
            )
    return notes


def _notes(results: list[Any], local: bool, source: str, prices: Any) -> list[str]:
    import os

    notes = [f"questions: {source}"]
    if local:
        notes.append(
            f"local box: every endpoint ran on this machine ({os.cpu_count()} CPUs), not on its instance type; "
            "$ figures price this machine's throughput at each instance's hourly rate. Run the same command "
            "with --endpoint NAME=INSTANCE_TYPE against real endpoints for real figures."
        )
    if any(r.spec.variant == "neuron" for r in results):
        notes.append(
            "neuron rows: the NeuronCore emulator ran the compiled graph on CPU (bf16 auto-cast numerics); its "
            "latency is not Inferentia2's. The model directory's neuron_cost_plan.json holds a roofline estimate."
        )
    notes.append(f"prices: {prices.source}, {prices.region}, as of {prices.as_of}")
    return notes
