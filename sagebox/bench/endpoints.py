"""`sagebox bench`: latency, throughput, cost and accuracy of endpoints of any task, measured side by side.

Every endpoint gets the same requests, in the same order. Endpoints take turns in rounds (A, B, C, A, B, C,
...), so a noisy neighbour slows all of them alike, and the ratios between rows hold even when the absolute
numbers wander. The invoke path is boto3's sagemaker-runtime client: the same code for the local box and a
real account.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagebox.bench.cost import cost_per_million, relative_cost_performance
from sagebox.bench.loadgen import LoadPlan, run_load
from sagebox.bench.stats import summarize_ms
from sagebox.bench.workloads import Workload
from sagebox.invoke import invoke_json


@dataclass(frozen=True)
class EndpointSpec:
    label: str  # target name or endpoint name, as the table shows it
    endpoint_name: str
    instance_type: str
    variant: str
    task: str = "question-answering"
    target_variant: str | None = None  # one production variant of a multi-variant endpoint (InvokeEndpoint's)


@dataclass
class EndpointResult:
    spec: EndpointSpec
    latencies_s: list[float] = field(default_factory=list)
    busy_s: float = 0.0  # wall time of this endpoint's rounds only
    errors: list[str] = field(default_factory=list)
    predictions: dict[str, Any] = field(default_factory=dict)  # request key -> what the workload keeps of the answer

    @property
    def qps(self) -> float:
        return len(self.latencies_s) / self.busy_s if self.busy_s > 0 else 0.0


@dataclass(frozen=True)
class BenchPlan:
    queries: int
    concurrency: int = 1
    rate_qps: float | None = None
    warmup: int = 5
    round_size: int = 25
    max_seconds: float = 3600.0


def run_benchmark(
    runtime: Any,
    endpoints: Sequence[EndpointSpec],
    workloads: Mapping[str, Workload],
    plan: BenchPlan,
    on_round: Callable[[str, int, int], None] = lambda label, done, total: None,
) -> list[EndpointResult]:
    """Send plan.queries requests to every endpoint (its task's workload), interleaving endpoints round by round."""
    if any(len(workloads[spec.task]) == 0 for spec in endpoints):
        raise ValueError("no queries to send")
    results = [EndpointResult(spec) for spec in endpoints]
    lock = threading.Lock()

    def sender(result: EndpointResult, offset: int) -> Callable[[int], None]:
        workload = workloads[result.spec.task]

        def send(i: int) -> None:
            key, body = workload.body(offset + max(i, 0))
            answer = invoke_json(
                runtime, result.spec.endpoint_name, body, target_variant=result.spec.target_variant
            ).body
            if i >= 0:
                with lock:
                    result.predictions.setdefault(key, workload.answer(answer))

        return send

    for result in results:  # warm every endpoint before any measurement
        run_load(sender(result, 0), LoadPlan(queries=0, warmup=plan.warmup))
    deadline = time.monotonic() + plan.max_seconds
    done = 0
    while done < plan.queries and time.monotonic() < deadline:
        size = min(plan.round_size, plan.queries - done)
        for result in results:
            outcome = run_load(
                sender(result, done),
                LoadPlan(queries=size, concurrency=plan.concurrency, rate_qps=plan.rate_qps),
            )
            result.latencies_s.extend(outcome.latencies_s)
            result.errors.extend(outcome.errors)
            result.busy_s += outcome.wall_s
            on_round(result.spec.label, done + size, plan.queries)
        done += size
    return results


def table_rows(
    results: Sequence[EndpointResult],
    prices: Any,
    baseline: str | None,
    accuracy: Mapping[str, Mapping[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """One row per endpoint: latency percentiles, QPS, $/hour, $/1M queries, relative $/performance (against the
    baseline row of the same task: an embedding and an answer are not the same work), and its task's scores."""
    rows: list[dict[str, Any]] = []
    costs: dict[str, dict[str, float]] = {}
    for result in results:
        spec = result.spec
        row: dict[str, Any] = {
            "endpoint": spec.label,
            "endpoint_name": spec.endpoint_name,
            "instance_type": spec.instance_type,
            "variant": spec.variant,
            "task": spec.task,
            "requests": len(result.latencies_s),
            "errors": len(result.errors),
        }
        if result.latencies_s:
            summary = summarize_ms(result.latencies_s)
            row.update({k: summary[k] for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms")})
            row["qps"] = result.qps
        hourly = prices.per_hour.get(spec.instance_type)
        row["usd_per_hour"] = hourly
        if hourly is not None and result.qps > 0:
            row["usd_per_million"] = cost_per_million(hourly, result.qps)
            costs.setdefault(spec.task, {})[spec.label] = row["usd_per_million"]
        if accuracy and spec.label in accuracy:
            row.update(accuracy[spec.label])
        rows.append(row)
    fp32 = {r.spec.task: r.spec.label for r in reversed(results) if r.spec.variant == "fp32"}
    for task, task_costs in costs.items():
        base = next((b for b in (baseline, fp32.get(task)) if b in task_costs), next(iter(task_costs)))
        relative = relative_cost_performance(task_costs, base)
        for row in rows:
            if row["endpoint"] in relative:
                row["relative_cost"] = relative[row["endpoint"]]
                row["baseline"] = base
    return rows
