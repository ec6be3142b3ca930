"""One `sagebox bench` run: which endpoints and requests, the measured rounds, accuracy, notes and reports.

The CLI parses and prints; this module decides and writes. Each endpoint gets its task's requests
(sagebox/bench/workloads.py). Question answering: latency, throughput and cost come from one question set (the
demo model's dev split on the local box, `--eval` otherwise); a second, accuracy-only set (the hand-written
held-out set on the local box, `--also-eval` otherwise) adds EM/F1 columns without touching latency. Other tasks:
`--data TASK=PATH`, else (feature-extraction on the local box) the hand-made retrieval set, else built-in text
that is timed but not scored.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from container.manifest import TASKS, VARIANTS
from sagebox.bench.endpoints import BenchPlan, EndpointResult, EndpointSpec, run_benchmark, table_rows
from sagebox.bench.workloads import QuestionWorkload, Workload, text_workload
from sagebox.errors import SageboxError
from sagebox.paths import REPO
from sagebox.pipeline.data.squad import QAExample
from sagebox.runtime import Runtime

# The hand-written held-out set (tests/data/heldout): never used to train, calibrate or tune, only to report.
HELDOUT = REPO / "tests" / "data" / "heldout" / "heldout_qa.json"
# The hand-made query/passage set (tests/data/retrieval): the embeddings endpoints' recall@10 on the local box.
RETRIEVAL = REPO / "tests" / "data" / "retrieval" / "retrieval.jsonl"


@dataclass(frozen=True)
class QuestionSet:
    source: str  # what the notes say it is
    examples: list[QAExample]


@dataclass(frozen=True)
class BenchRequest:
    runtime: Runtime
    endpoints: list[EndpointSpec]
    questions: QuestionSet  # timed, and scored (EM/F1)
    plan: BenchPlan
    prices: Any  # infra.catalog.PriceTable
    out: Path
    baseline: str | None = None
    heldout: QuestionSet | None = None  # scored only (held-out EM/F1)
    data: dict[str, Path] = field(default_factory=dict)  # text task -> its labelled data (--data TASK=PATH)


@dataclass
class BenchOutcome:
    title: str
    rows: list[dict[str, Any]]
    notes: list[str]
    results: list[EndpointResult]
    out: Path
    errors: list[str] = field(default_factory=list)


def parse_endpoints(raw: Sequence[str]) -> list[EndpointSpec]:
    """`NAME=INSTANCE_TYPE[:VARIANT[:TASK]]` options (real endpoints; the task defaults to question-answering)."""
    specs = []
    for item in raw:
        name, sep, rest = item.partition("=")
        instance_type, _, tail = rest.partition(":")
        variant, _, task = tail.partition(":")
        if not sep or not name or not instance_type:
            raise SageboxError(f"--endpoint {item!r}: expected NAME=INSTANCE_TYPE[:VARIANT]")
        if not re.fullmatch(r"ml\.[a-z0-9-]+\.[a-z0-9]+", instance_type):
            raise SageboxError(
                f"--endpoint {item!r}: {instance_type!r} is not a SageMaker instance type (ml.c6i.2xlarge)"
            )
        if variant and variant not in VARIANTS:
            raise SageboxError(f"--endpoint {item!r}: variant {variant!r} is not one of {', '.join(VARIANTS)}")
        if task and task not in TASKS:
            raise SageboxError(f"--endpoint {item!r}: task {task!r} is not one of {', '.join(TASKS)}")
        specs.append(EndpointSpec(name, name, instance_type, variant or "?", task or "question-answering"))
    return specs


def parse_data(raw: Sequence[str] | None) -> dict[str, Path]:
    """`--data TASK=PATH` options: a text task's labelled data (the formats `sagebox build --eval` reads)."""
    found: dict[str, Path] = {}
    for item in raw or ():
        task, sep, path = item.partition("=")
        if not sep or task not in TASKS or task == "question-answering" or not path:
            text_tasks = ", ".join(t for t in TASKS if t != "question-answering")
            raise SageboxError(f"--data {item!r}: expected TASK=PATH with TASK one of {text_tasks} (QA: --eval)")
        found[task] = Path(path)
    return found


GENERATION = "text-generation"


def box_endpoints(runtime: Runtime, targets: Sequence[str] | None) -> list[EndpointSpec]:
    endpoints = runtime.endpoints
    if not endpoints:
        raise SageboxError("no endpoints: start the local box with `sagebox up`, or pass --endpoint NAME=INSTANCE_TYPE")
    # Decoder LLMs answer in tokens, not queries: scripts/bench_generation.py measures them (time to first token,
    # inter-token latency, tokens/s at 1, 4 and 16 streams, $ per million tokens).
    generating = {name for name, e in endpoints.items() if e.task == GENERATION}
    wanted = list(targets) if targets else sorted(set(endpoints) - generating)
    unknown = [t for t in wanted if t not in endpoints]
    if unknown:
        raise SageboxError(f"the local box has no target(s) {', '.join(unknown)} (it has {', '.join(endpoints)})")
    named = sorted(generating.intersection(wanted))
    if named:
        raise SageboxError(f"{', '.join(named)} generate(s) text: benchmark with `python scripts/bench_generation.py`")
    specs = []
    for t in wanted:
        e = endpoints[t]
        production = [v for v in e.variants if not v.shadow]
        if len(production) > 1:  # one row per production variant, each invoked with TargetVariant
            specs += [
                EndpointSpec(
                    f"{t}/{v.name}", e.endpoint_name, v.instance_type or e.instance_type, v.model, v.task, v.name
                )
                for v in production
            ]
        else:
            specs.append(EndpointSpec(t, e.endpoint_name, e.instance_type, e.variant, e.task))
    return specs


def default_questions(local: bool) -> QuestionSet:
    from sagebox.pipeline.data.squad import GoldAnswer

    if local:
        # The split alone, never the model: a bench of the box must not train the demo model on a cold cache (it
        # made a 30 s end-to-end test take 200-500 s in CI, where the cache starts empty).
        from sagebox.demo.models import demo_dev_questions

        label = "the demo QA model's dev split (corpus articles it did not train on, generated questions)"
        return QuestionSet(label, demo_dev_questions())
    from sagebox.demo_data import RAINFOREST_ANSWERS, RAINFOREST_CONTEXT, RAINFOREST_QUESTIONS

    examples = [
        QAExample(
            f"rainforest-{i}", q, RAINFOREST_CONTEXT, tuple(GoldAnswer(a, RAINFOREST_CONTEXT.find(a)) for a in golds)
        )
        for i, (q, golds) in enumerate(zip(RAINFOREST_QUESTIONS, RAINFOREST_ANSWERS, strict=True))
    ]
    return QuestionSet("the reference workflow's Amazon rainforest questions", examples)


def heldout_questions(path: Path | None, local: bool) -> QuestionSet | None:
    """An accuracy-only set: `path`, or on the local box the hand-written held-out set when the checkout has it."""
    from sagebox.pipeline.data.squad import load_squad

    chosen = path or (HELDOUT if local and HELDOUT.is_file() else None)
    if chosen is None:
        return None
    examples = load_squad(chosen)
    label = "the hand-written held-out set" if chosen == HELDOUT else str(chosen)
    return QuestionSet(f"{label} ({len(examples)} questions, scored only)", examples)


def _score(results: Sequence[EndpointResult], workloads: dict[str, Workload]) -> dict[str, dict[str, float]]:
    scores = {}
    for result in results:
        found = workloads[result.spec.task].score(result.predictions)
        if found:
            scores[result.spec.label] = found
    return scores


def _complete(request: BenchRequest, results: Sequence[EndpointResult], workloads: dict[str, Workload]) -> None:
    """An endpoint whose score needs every request of its set answered (a retrieval set: every text embedded, for
    recall@10) and did not get them all in the timed rounds gets the missing ones now, untimed, one at a time."""
    from sagebox.invoke import invoke_json

    for result in results:
        workload = workloads[result.spec.task]
        if not workload.complete():
            continue
        for index in range(len(workload)):
            key, body = workload.body(index)
            if key in result.predictions:
                continue
            try:
                answer = invoke_json(
                    request.runtime.client, result.spec.endpoint_name, body, target_variant=result.spec.target_variant
                ).body
            except SageboxError as exc:
                result.errors.append(str(exc))
                break
            result.predictions[key] = workload.answer(answer)


def workloads_for(request: BenchRequest) -> dict[str, Workload]:
    """Each task's requests, for the tasks the benchmarked endpoints serve."""
    tasks = {spec.task for spec in request.endpoints}
    found: dict[str, Workload] = {}
    for task in sorted(tasks):
        if task == "question-answering":
            found[task] = QuestionWorkload(request.questions.examples, request.questions.source)
            continue
        path = request.data.get(task)
        if path is None and task == "feature-extraction" and request.runtime.local and RETRIEVAL.is_file():
            path = RETRIEVAL
        found[task] = text_workload(task, path)
    return found


def notes_for(
    request: BenchRequest, results: Sequence[EndpointResult], workloads: dict[str, Workload] | None = None
) -> list[str]:
    workloads = workloads or {}
    tasks = {r.spec.task for r in results}
    notes = [f"questions: {request.questions.source}"] if "question-answering" in tasks or not workloads else []
    notes += [f"{task} requests: {w.source}" for task, w in sorted(workloads.items()) if task != "question-answering"]
    if request.heldout is not None:
        notes.append(f"held-out columns: {request.heldout.source}")
    if request.runtime.local:
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
    prices = request.prices
    notes.append(f"prices: {prices.source}, {prices.region}, as of {prices.as_of}")
    return notes + neuron_estimates(request)


def neuron_estimates(request: BenchRequest) -> list[str]:
    """The cost model's per-bucket estimate for each local neuron endpoint (read from its model directory)."""
    from neuron_emu.errors import NeuronEmuError
    from neuron_emu.qa import instance_estimate, read_plans

    notes = []
    for spec in request.endpoints:
        endpoint = request.runtime.endpoints.get(spec.label)
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


def run(
    request: BenchRequest, on_round: Callable[[str, int, int], None] = lambda label, done, total: None
) -> BenchOutcome:
    from sagebox.bench import report

    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    workloads = workloads_for(request)
    results = run_benchmark(request.runtime.client, request.endpoints, workloads, request.plan, on_round)
    _complete(request, results, workloads)
    accuracy = _score(results, workloads)
    rows = table_rows(results, request.prices, request.baseline, accuracy)
    results_for_errors = list(results)
    qa = [s for s in request.endpoints if s.task == "question-answering"]
    if request.heldout is not None and qa:
        # Endpoints in turn, as the timed rounds: scoring the three demo endpoints at once was slower on 2 cores
        # (`sagebox bench --queries 10` 40-41 s against 32 s).
        scored = BenchPlan(len(request.heldout.examples), concurrency=request.plan.concurrency, warmup=0)
        heldout_work: dict[str, Workload] = {
            "question-answering": QuestionWorkload(request.heldout.examples, request.heldout.source)
        }
        extra = run_benchmark(request.runtime.client, qa, heldout_work, scored)
        heldout = _score(extra, heldout_work)
        for row in rows:
            if row["endpoint"] in heldout:
                row["heldout_em"], row["heldout_f1"] = heldout[row["endpoint"]]["em"], heldout[row["endpoint"]]["f1"]
        results_for_errors += extra
    notes = notes_for(request, results, workloads)
    plan = request.plan
    title = f"Sagebox benchmark: {plan.queries} requests per endpoint, concurrency {plan.concurrency}"
    meta = {
        "started": started,
        "queries": plan.queries,
        "concurrency": plan.concurrency,
        "rate_qps": plan.rate_qps,
        "questions": request.questions.source,
        "heldout": request.heldout.source if request.heldout else None,
        "local_box": request.runtime.local,
        "prices_source": request.prices.source,
        "prices_region": request.prices.region,
        "prices_as_of": request.prices.as_of,
    }
    latencies = {r.spec.label: [v * 1000 for v in r.latencies_s] for r in results}
    out = request.out
    report.write_json(out / "results.json", {"meta": meta, "rows": rows, "notes": notes, "latencies_ms": latencies})
    report.write_cdf_png(out / "latency_cdf.png", latencies, title)
    report.write_atomic(out / "report.md", report.markdown(rows, meta, notes).encode())
    errors = [e for r in results_for_errors for e in r.errors]
    return BenchOutcome(title, rows, notes, results, out, errors)
