"""What the runtime gateway measures per InvokeEndpoint, as SageMaker reports it to CloudWatch (namespace
AWS/SageMaker): Invocations, Invocation4XXErrors, Invocation5XXErrors, InvocationsPerInstance, ModelLatency and
OverheadLatency (microseconds), per endpoint and variant, and per endpoint config as well, so one fleet of a
blue/green update can be told from the other (SageMaker's alarm examples monitor "the new fleet" with the
EndpointConfigName dimension: https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-configuration.html).

`record` is on the request path and only appends a tuple; `drain` (off the request path, every second or so)
aggregates into PutMetricData datums: counts as statistic sets per request (so Average is a rate, as AWS
documents for the error metrics), latencies as raw Values (so percentiles can be computed), bucketed by
`resolution_s` of their time (one box second: the finest resolution CloudWatch stores).
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

NAMESPACE = "AWS/SageMaker"
FLUSH_S = 1.0  # how often the gateway publishes what it measured
MAX_VALUES_PER_DATUM = 150  # PutMetricData's limit on Values
MAX_DATUMS_PER_CALL = 1000

OK, CLIENT_ERROR, SERVER_ERROR = "2xx", "4xx", "5xx"
COUNTS = ("Invocations", "Invocation4XXErrors", "Invocation5XXErrors", "InvocationsPerInstance")
LATENCIES = ("ModelLatency", "OverheadLatency")


@dataclass(frozen=True)
class Invocation:
    at: float  # epoch seconds, when the answer was ready
    endpoint: str
    variant: str
    config: str  # the endpoint config whose fleet answered ("" when unknown)
    instances: int  # the variant's routed instances in that fleet
    outcome: str  # OK | CLIENT_ERROR | SERVER_ERROR
    model_s: float | None  # the container's time (None: it never answered)
    overhead_s: float


class InvocationRecorder:
    def __init__(self, resolution_s: float = 1.0) -> None:
        self.resolution_s = resolution_s
        self._pending: list[Invocation] = []

    def record(self, invocation: Invocation) -> None:
        self._pending.append(invocation)

    def __len__(self) -> int:
        return len(self._pending)

    def drain(self) -> list[dict[str, Any]]:
        """Every recorded invocation as PutMetricData datums (and forget them)."""
        taken, self._pending = self._pending, []
        counts: defaultdict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0.0, math.inf, -math.inf])
        latencies: defaultdict[tuple[Any, ...], list[float]] = defaultdict(list)
        for item in taken:
            bucket = math.floor(item.at / self.resolution_s)
            per_instance = 1.0 / max(1, item.instances)
            samples = {
                "Invocations": 1.0,
                "Invocation4XXErrors": 1.0 if item.outcome == CLIENT_ERROR else 0.0,
                "Invocation5XXErrors": 1.0 if item.outcome == SERVER_ERROR else 0.0,
                "InvocationsPerInstance": per_instance,
            }
            for dims in _dimension_sets(item):
                for name, value in samples.items():
                    entry = counts[(bucket, dims, name)]
                    entry[0] += 1
                    entry[1] += value
                    entry[2] = min(entry[2], value)
                    entry[3] = max(entry[3], value)
                if item.model_s is not None:
                    latencies[(bucket, dims, "ModelLatency")].append(round(item.model_s * 1e6, 1))
                latencies[(bucket, dims, "OverheadLatency")].append(round(item.overhead_s * 1e6, 1))
        datums: list[dict[str, Any]] = []
        for (bucket, dims, name), (n, total, low, high) in counts.items():
            datums.append(
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
                    "Timestamp": self._stamp(bucket),
                    "StatisticValues": {"SampleCount": n, "Sum": total, "Minimum": low, "Maximum": high},
                    "Unit": "None",
                }
            )
        for (bucket, dims, name), values in latencies.items():
            for start in range(0, len(values), MAX_VALUES_PER_DATUM):
                datums.append(
                    {
                        "MetricName": name,
                        "Dimensions": [{"Name": k, "Value": v} for k, v in dims],
                        "Timestamp": self._stamp(bucket),
                        "Values": values[start : start + MAX_VALUES_PER_DATUM],
                        "Unit": "Microseconds",
                    }
                )
        return datums

    def _stamp(self, bucket: int) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(bucket * self.resolution_s, datetime.UTC)


def _dimension_sets(item: Invocation) -> list[tuple[tuple[str, str], ...]]:
    base = (("EndpointName", item.endpoint), ("VariantName", item.variant))
    if item.config:
        return [base, (*base, ("EndpointConfigName", item.config))]
    return [base]


def batches(datums: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [datums[i : i + MAX_DATUMS_PER_CALL] for i in range(0, len(datums), MAX_DATUMS_PER_CALL)]
