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
    """One production variant as DescribeEndpoint reports it (what serves, not an update's new fleet)."""

    name: str
    weight: float
    instances: int  # CurrentInstanceCount
    desired: int  # DesiredInstanceCount


@dataclass(frozen=True)
class BoxEndpoint:
    target: str  # the infra/targets.json target of a `sagebox-<target>` endpoint, else the endpoint's name
    endpoint_name: str
    status: str
    instance_type: str
    variant: str  # fp32 | int8 | neuron (from the served model's manifest), "?" when unknown
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


def _variant_of(model_dir: str | None) -> str:
    if not model_dir:
        return "?"
    try:
        return str(json.loads((Path(model_dir) / "manifest.json").read_text())["variant"])
    except (OSError, ValueError, KeyError):
        return "?"


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
        instances = [i for v in running for i in v.get("instances", [])]
        target = name.removeprefix(STACK_PREFIX) if name.startswith(STACK_PREFIX) else name
        found[target] = BoxEndpoint(
            target=target,
            endpoint_name=name,
            status=described["EndpointStatus"],
            instance_type=", ".join(sorted({v.get("InstanceType", "?") for v in variants})) or "?",
            variant=_variant_of(running[0].get("model_dir")) if running else "?",
            failure_reason=described.get("FailureReason", "") or "",
            models=tuple(v.get("ModelName", "?") for v in variants),
            instances=len(instances),
            alive=sum(1 for i in instances if i.get("alive")),
            restarts=sum(int(v.get("restarts", 0)) for v in running),
            images=tuple(sorted({v.get("image", "") for v in running})),
            model_dir=str(running[0].get("model_dir", "")) if running else "",
            variants=tuple(
                VariantView(
                    str(v.get("VariantName", "?")),
                    float(v.get("CurrentWeight", 1.0)),
                    int(v.get("CurrentInstanceCount", 0)),
                    int(v.get("DesiredInstanceCount", v.get("CurrentInstanceCount", 0))),
                )
                for v in described.get("ProductionVariants", [])
            ),
            update=_update_text(described, entry),
            retiring=", ".join(
                f"{r.get('config')} stops in {float(r.get('stops_in_s', 0)):.0f} s" for r in entry.get("retiring", [])
            ),
            rollbacks=int(entry.get("rollbacks", 0)),
            last_update=_last_update_text(entry.get("last_update")),
            scaling=_scaling_text(entry.get("scaling") or []),
        )
    return found


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
