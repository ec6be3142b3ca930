"""The gateway's metrics: every invocation measured as SageMaker measures it, and where the datums are published.

Invocations are recorded on the request path (sagebox.box.invocation_metrics only appends there); the gateway's
flush drains them, with the datums it adds of its own (ModelSetupTime of cold starts, the async backlog), once a
second and publishes them off the request path: by default to the box's embedded CloudWatch, where the control plane
evaluates alarms and autoscaling on them.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from sagebox.box.gateway.picking import Choice
from sagebox.box.invocation_metrics import (
    CLIENT_ERROR,
    NAMESPACE,
    OK,
    SERVER_ERROR,
    Invocation,
    InvocationRecorder,
    batches,
)

log = logging.getLogger("sagebox.runtime")

# Serverless metrics (https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-monitoring.html).
MODEL_SETUP_TIME = "ModelSetupTime"


class MetricsSink(Protocol):
    def publish(self, datums: list[dict[str, Any]]) -> None: ...


class EmbeddedCloudWatch:
    """PutMetricData to the box's embedded AWS, found through the file it writes into the box's state directory
    (re-read when it is missing or a call fails: the embedded AWS may start after the gateway, or restart)."""

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._client: Any = None
        self._warned_at = -float("inf")

    def _connect(self) -> Any:
        from sagebox.box.embedded_aws.config import ACCESS_KEY, read_endpoint_file

        found = read_endpoint_file(self._state_dir)
        if found is None:
            return None
        import boto3

        return boto3.client(
            "cloudwatch",
            endpoint_url=found.url,
            region_name=found.region,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=ACCESS_KEY,
        )

    def resolution_s(self) -> float:
        from sagebox.box.embedded_aws.config import read_endpoint_file

        found = read_endpoint_file(self._state_dir)
        return found.resolution_s if found else 1.0

    def publish(self, datums: list[dict[str, Any]]) -> None:
        if self._client is None:
            self._client = self._connect()
            if self._client is None:
                return  # no embedded AWS beside this gateway: nothing to publish to
        try:
            for batch in batches(datums):
                self._client.put_metric_data(Namespace=NAMESPACE, MetricData=batch)
        except Exception as exc:  # the embedded AWS stopped or moved: metrics of this second are lost
            self._client = None
            if time.monotonic() - self._warned_at > 60:
                self._warned_at = time.monotonic()
                log.warning("could not publish invocation metrics to the embedded CloudWatch: %s", exc)


def outcome_of(status: int) -> str:
    return OK if status < 400 else CLIENT_ERROR if status < 500 else SERVER_ERROR


class Meter:
    """What the gateway measured since the last flush. Metrics are bucketed by the sink's `resolution_s` (one box
    second, as the embedded AWS says) when it has one, read again at every flush (the embedded AWS may start later)."""

    def __init__(self, sink: MetricsSink, now: Callable[[], float], timer: Callable[[], float]) -> None:
        resolution = getattr(sink, "resolution_s", None)
        self._resolution: Callable[[], float] | None = resolution if callable(resolution) else None
        self._now = now
        self._timer = timer
        self.recorder = InvocationRecorder(self._resolution() if self._resolution is not None else 1.0)
        self._extra: list[dict[str, Any]] = []

    def measured(self, choice: Choice, name: str, started: float, outcome: str, model_s: float | None) -> None:
        """One invocation answered (or not: `model_s` None), `started` on the timer."""
        total = self._timer() - started
        self.recorder.record(
            Invocation(
                self._now(),
                name,
                choice.variant.name,
                choice.config,
                choice.fleet_size,
                outcome,
                model_s,
                max(0.0, total - (model_s or 0.0)),
            )
        )

    def datum(self, name: str, dims: dict[str, str], value: float, unit: str) -> dict[str, Any]:
        return {
            "MetricName": name,
            "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
            "Timestamp": datetime.datetime.fromtimestamp(self._now(), datetime.UTC),
            "Value": value,
            "Unit": unit,
        }

    def add(self, datum: dict[str, Any]) -> None:
        """A datum of the gateway's own, published with the next flush."""
        self._extra.append(datum)

    def refresh_resolution(self) -> None:
        if self._resolution is not None:
            self.recorder.resolution_s = self._resolution()

    def take_extra(self) -> list[dict[str, Any]]:
        taken, self._extra = self._extra, []
        return taken
