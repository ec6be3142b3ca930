"""`sagebox bench`: latency, throughput, cost and accuracy of QA endpoints, measured side by side.

Every endpoint gets the same requests, in the same order. Endpoints take turns in rounds (A, B, C, A, B, C,
...), so a noisy neighbour slows all of them alike, and the ratios between rows hold even when the absolute
numbers wander. The invoke path is boto3's sagemaker-runtime client: the same code for the local box and a
real account.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sagebox.bench.cost import cost_per_million, relative_cost_performance
from sagebox.bench.loadgen import LoadPlan, run_load
from sagebox.bench.stats import summarize_ms
from sagebox.invoke import invoke_qa
from sagebox.pipeline.squad import QAExample


@dataclass(frozen=True)
class EndpointSpec:
    label: str  # target name or endpoint name, as the table shows it
    endpoint_name: str
    instance_type: str
    variant: str


@dataclass
class EndpointResult:
    spec: EndpointSpec
    latencies_s: list[float] = field(default_factory=list)
    busy_s: float = 0.0  # wall time of this endpoint's rounds only
    errors: list[str] = field(default_factory=list)
    predictions: dict[str, str] = field(default_factory=dict)

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
    queries: Sequence[QAExample],
    plan: BenchPlan,
    on_round: Callable[[str, int, int], None] = lambda label, done, total: None,
) -> list[EndpointResult]:
    """Send plan.queries requests to every endpoint, interleaving endpoints round by round."""
    if not queries:
        raise ValueError("no queries to send")
    results = [EndpointResult(spec) for spec in endpoints]
    lock = threading.Lock()

    def sender(result: EndpointResult, offset: int) -> Callable[[int], None]:
        def send(i: int) -> None:
            query = queries[(offset + max(i, 0)) % len(queries)]
            answer = invoke_qa(runtime, result.spec.endpoint_name, query.question, query.context)
            if i >= 0:
                with lock:
                    result.predictions.setdefault(query.id, answer.answer)

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
    accuracy: dict[str, tuple[float, float]] | None = None,
) -> list[dict[str, Any]]:
    """One row per endpoint: latency percentiles, QPS, $/hour, $/1M queries, relative $/performance, EM/F1."""
    rows: list[dict[str, Any]] = []
    costs: dict[str, float] = {}
    for result in results:
        spec = result.spec
        row: dict[str, Any] = {
            "endpoint": spec.label,
            "endpoint_name": spec.endpoint_name,
            "instance_type": spec.instance_type,
            "variant": spec.variant,
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
            costs[spec.label] = row["usd_per_million"]
        if accuracy and spec.label in accuracy:
            row["em"], row["f1"] = accuracy[spec.label]
        rows.append(row)
    if costs:
        base = baseline if baseline in costs else next(iter(costs))
        relative = relative_cost_performance(costs, base)
        for row in rows:
            if row["endpoint"] in relative:
                row["relative_cost"] = relative[row["endpoint"]]
                row["baseline"] = base
    return rows
