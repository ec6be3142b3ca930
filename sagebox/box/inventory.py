"""The box's endpoints as a user sees them: the embedded SageMaker's answer, plus what the control plane runs."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagebox.box.reconciler import load_fleet
from sagebox.box.state import BoxState

STACK_PREFIX = "sagebox-"


@dataclass(frozen=True)
class VariantView:
    """One production (or shadow) variant as DescribeEndpoint reports it (what serves, not an update's new fleet)."""

    name: str
    weight: float
    instances: int  # CurrentInstanceCount (a serverless variant: the instances the box runs now, 0 or 1)
    desired: int  # DesiredInstanceCount
    shadow: bool = False
    serverless: str = ""  # e.g. "2048 MB, max 5 at once: cold" (a serverless variant's config and state)
    model: str = "?"  # the variant's model: fp32 | int8 | neuron (its manifest's variant)
    task: str = "?"  # the variant's model's task
    instance_type: str = ""

    def describe(self) -> str:
        """What `sagebox status` shows in its variants column."""
        if self.serverless:
            return f"{self.name} {self.weight:g}, serverless {self.serverless}"
        head = f"{self.name} (shadow)" if self.shadow else f"{self.name} {self.weight:g}"
        return f"{head}, {self.instances}" + (f" -> {self.desired}" if self.desired != self.instances else "")


@dataclass(frozen=True)
class BoxEndpoint:
    target: str  # the infra/targets.json target of a `sagebox-<target>` endpoint, else the endpoint's name
    endpoint_name: str
    status: str
    instance_type: str
    variant: str  # fp32 | int8 | neuron (from the served model's manifest), "?" when unknown
    task: str = "?"  # the served model's task (question-answering, text-classification, ...), "?" when unknown
    failure_reason: str = ""
    models: tuple[str, ...] = ()
    instances: int = 0
    alive: int = 0
    restarts: int = 0
    images: tuple[str, ...] = field(default_factory=tuple)
    model_dir: str = ""  # the first variant's model directory, as the control plane untarred it
    variants: tuple[VariantView, ...] = ()
    update: str = ""  # an update under way: its config, the new fleet's share of traffic and its step
    retiring: str = ""  # an old fleet waiting for its termination wait
    rollbacks: int = 0  # updates rolled back by their alarms since the box started
    last_update: str = ""  # how the last update ended (completed, rolled back, failed) and why
    scaling: str = ""  # the last instance count change (autoscaling or UpdateEndpointWeightsAndCapacities)
    kind: str = "real-time"  # "serverless" or "async" for those endpoint types
    serverless: str = ""  # cold starts of a serverless endpoint: how many, the last one's length
    asynchronous: str = ""  # where an asynchronous endpoint writes its answers and failures
    shadow: str = ""  # where the gateway records a shadow's answers (read by `sagebox shadow-report`)


def _manifest_field(model_dir: str | None, name: str, default: str = "?") -> str:
    """A field of the served model's manifest (read as JSON: the box must not fail on a model it cannot parse)."""
    if not model_dir:
        return "?"
    try:
        value = json.loads((Path(model_dir) / "manifest.json").read_text()).get(name, default)
    except (OSError, ValueError, AttributeError):
        return "?"
    return "question-answering" if value == "extractive-qa" else str(value)


def _variant_of(model_dir: str | None) -> str:
    return _manifest_field(model_dir, "variant")


def list_endpoints(state: BoxState, state_dir: Path, sagemaker: Any) -> dict[str, BoxEndpoint]:
    """Target (or endpoint name) -> what the box knows of it, sorted by name."""
    fleet = load_fleet(state_dir)
    found: dict[str, BoxEndpoint] = {}
    names = [e["EndpointName"] for e in sagemaker.list_endpoints(MaxResults=100)["Endpoints"]]
    for name in sorted(names):
        described = sagemaker.describe_endpoint(EndpointName=name)
        try:
            config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            variants = config["ProductionVariants"]
        except Exception:  # the config was deleted under the endpoint
            variants = []
        entry = fleet.get(name, {})
        running = entry.get("variants", [])
        by_name = {str(v.get("name")): v for v in running}
        instances = [i for v in running for i in v.get("instances", [])]
        target = name.removeprefix(STACK_PREFIX) if name.startswith(STACK_PREFIX) else name
        found[target] = BoxEndpoint(
            target=target,
            endpoint_name=name,
            status=described["EndpointStatus"],
            instance_type=", ".join(sorted({v.get("InstanceType", "?") for v in variants})) or "?",
            variant=_variant_of(running[0].get("model_dir")) if running else "?",
            # Manifests written before there were other tasks record none: they are question answering.
            task=_manifest_field(running[0].get("model_dir"), "task", "question-answering") if running else "?",
            failure_reason=described.get("FailureReason", "") or "",
            models=tuple(v.get("ModelName", "?") for v in variants),
            instances=len(instances),
            alive=sum(1 for i in instances if i.get("alive")),
            restarts=sum(int(v.get("restarts", 0)) for v in running),
            images=tuple(sorted({v.get("image", "") for v in running})),
            model_dir=str(running[0].get("model_dir", "")) if running else "",
            variants=tuple(
                _variant_view(v, by_name.get(str(v.get("VariantName"))), shadow=False)
                for v in described.get("ProductionVariants", [])
            )
            + tuple(
                _variant_view(v, by_name.get(str(v.get("VariantName"))), shadow=True)
                for v in described.get("ShadowProductionVariants") or []
            ),
            update=_update_text(described, entry),
            retiring=", ".join(
                f"{r.get('config')} stops in {float(r.get('stops_in_s', 0)):.0f} s" for r in entry.get("retiring", [])
            ),
            rollbacks=int(entry.get("rollbacks", 0)),
            last_update=_last_update_text(entry.get("last_update")),
            scaling=_scaling_text(entry.get("scaling") or []),
            kind="serverless"
            if any(v.get("serverless") for v in running)
            else "async"
            if entry.get("async")
            else "real-time",
            serverless=_serverless_text(running),
            asynchronous=_async_text(entry.get("async")),
            shadow=(
                f"{', '.join(str(v.get('name')) for v in running if v.get('shadow'))} gets copies of requests: "
                f"`sagebox shadow-report {name}`"
                if any(v.get("shadow") for v in running)
                else ""
            ),
        )
    return found


def _variant_view(described: dict[str, Any], running: dict[str, Any] | None, shadow: bool) -> VariantView:
    running = running or {}
    config = running.get("serverless") or {}
    instances = int(described.get("CurrentInstanceCount", len(running.get("instances", []))))
    serverless = (
        f"{config.get('memory_mb')} MB, max {config.get('max_concurrency')} at once: {config.get('state', '?')}"
        if config
        else ""
    )
    model_dir = running.get("model_dir")
    return VariantView(
        str(described.get("VariantName", "?")),
        float(described.get("CurrentWeight", 1.0)),
        instances,
        int(described.get("DesiredInstanceCount", instances)),
        shadow,
        serverless,
        _variant_of(model_dir),
        _manifest_field(model_dir, "task", "question-answering") if model_dir else "?",
        str(running.get("instance_type", "")),
    )


def _serverless_text(running: list[dict[str, Any]]) -> str:
    parts = []
    for variant in running:
        config = variant.get("serverless")
        if not config:
            continue
        last = config.get("last_cold_start_s")
        cold = f"{config.get('cold_starts', 0)} cold start(s)" + (f", the last {float(last):.1f} s" if last else "")
        zero = f"scaled to zero {config.get('scaled_to_zero', 0)} time(s)"
        parts.append(f"{variant.get('name')} {config.get('state', '?')}: {cold}, {zero}")
    return "; ".join(parts)


def _async_text(config: dict[str, Any] | None) -> str:
    if not config:
        return ""
    output = config.get("OutputConfig") or {}
    text = f"answers to {output.get('S3OutputPath', '?')}"
    if output.get("S3FailurePath"):
        text += f", failures to {output['S3FailurePath']}"
    topics = [t for t in (output.get("NotificationConfig") or {}).values() if isinstance(t, str)]
    return text + (f", notifies {', '.join(topics)}" if topics else "")


def _update_text(described: dict[str, Any], entry: dict[str, Any]) -> str:
    pending = described.get("PendingDeploymentSummary") or {}
    if not pending:
        return ""
    update = entry.get("update") or {}
    config = pending.get("EndpointConfigName", "?")
    if described.get("EndpointStatus") == "RollingBack":
        return f"to {config}: rolling back (all traffic on the old fleet, the new one stopping)"
    if update.get("config") == config:
        return f"to {config}: {update.get('status', '?')}, {float(update.get('share', 0)):.0%} of traffic"
    statuses = [s for v in pending.get("ProductionVariants", []) for s in v.get("VariantStatus", [])]
    return f"to {config}: {statuses[0].get('Status', 'Creating') if statuses else 'Creating'}"


def _last_update_text(last: dict[str, Any] | None) -> str:
    if not last:
        return ""
    at = str(last.get("at", ""))[11:19]
    return f"{last.get('outcome', '?')} {at} ({last.get('config', '?')}): {last.get('reason', '')}".strip()


def _scaling_text(events: list[dict[str, Any]]) -> str:
    if not events:
        return ""
    last = events[-1]
    return f"{last.get('variant', '?')} {last.get('from')} -> {last.get('to')} at {str(last.get('at', ''))[11:19]}"
