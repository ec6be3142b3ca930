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
        running = fleet.get(name, {}).get("variants", [])
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
        )
    return found
