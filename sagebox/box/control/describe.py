"""What DescribeEndpoint says of the fleets the control plane runs, written onto the embedded SageMaker's endpoint
records (moto's FakeEndpoint; a stand-in in tests).

Pure: each function changes only the record it is given, at the time it is given. Callers hold the fleet state's lock,
because moto's request threads answer DescribeEndpoint from these same records; a status is always set last, so
whoever sees InService also sees the variants that serve.
"""

from __future__ import annotations

import datetime
from typing import Any

from sagebox.box import specs
from sagebox.box.control.fleet_state import Deployment, VariantFleet
from sagebox.box.specs import EndpointSpec


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def wanted(endpoint: Any) -> str:
    """The config an endpoint should run: its pending update's, else its own."""
    pending = getattr(endpoint, "pending_deployment_summary", None) or {}
    return str(pending.get("EndpointConfigName") or endpoint.endpoint_config_name)


def in_service(endpoint: Any, deployment: Deployment, now: datetime.datetime) -> None:
    """The endpoint serves `deployment`'s config, with nothing pending and no failure."""
    endpoint.endpoint_config_name = deployment.config_name
    endpoint.pending_deployment_summary = None
    serving(endpoint, deployment, now)
    endpoint.failure_reason = None
    endpoint.last_modified_time = now
    endpoint.endpoint_status = specs.IN_SERVICE


def serving(endpoint: Any, deployment: Deployment, now: datetime.datetime) -> None:
    """What DescribeEndpoint says of the fleet that serves: its variants, shadow variants and async config."""
    endpoint.production_variants = variant_status(deployment.production, now)
    endpoint.shadow_production_variants = variant_status(deployment.shadows, now) or None
    endpoint.async_inference_config = deployment.async_config.describe() if deployment.async_config else None


def variant_status(fleets: list[VariantFleet], now: datetime.datetime) -> list[dict[str, Any]]:
    """DescribeEndpoint's ProductionVariantSummary of each fleet (a serverless one has its ServerlessConfig, no
    instance count)."""
    described = []
    for f in fleets:
        summary: dict[str, Any] = {
            "VariantName": f.spec.name,
            "CurrentWeight": f.weight,
            "DesiredWeight": f.weight,
        }
        if f.spec.serverless is not None:
            config = {
                "MemorySizeInMB": f.spec.serverless.memory_mb,
                "MaxConcurrency": f.spec.serverless.max_concurrency,
            }
            summary["CurrentServerlessConfig"] = summary["DesiredServerlessConfig"] = config
        else:
            summary["CurrentInstanceCount"] = len(f.instances)
            summary["DesiredInstanceCount"] = f.desired
        summary["DeployedImages"] = [
            {"SpecifiedImage": f.spec.image, "ResolvedImage": f.resolved_image, "ResolutionTime": now}
        ]
        described.append(summary)
    return described


def pending(
    endpoint: Any, spec: EndpointSpec, green: Deployment | None, status: str, message: str, now: datetime.datetime
) -> None:
    """DescribeEndpoint's PendingDeploymentSummary: the new config's variants and where the update stands (nothing
    when the endpoint is gone or has no update pending)."""
    pending_summary = getattr(endpoint, "pending_deployment_summary", None) if endpoint is not None else None
    if not pending_summary:
        return
    fleets = {f.spec.name: f for f in green.variants} if green is not None else {}
    summaries = []
    for variant in spec.variants:
        fleet = fleets.get(variant.name)
        count = len(fleet.instances) if fleet else 0
        summary: dict[str, Any] = {
            "VariantName": variant.name,
            "CurrentInstanceCount": count,
            "DesiredInstanceCount": fleet.desired if fleet else variant.instance_count,
            "CurrentWeight": fleet.weight if fleet else variant.weight,
            "DesiredWeight": fleet.weight if fleet else variant.weight,
            "InstanceType": variant.instance_type,
            "VariantStatus": [{"Status": status, "StatusMessage": message, "StartTime": now}],
        }
        if fleet:
            summary["DeployedImages"] = [
                {"SpecifiedImage": variant.image, "ResolvedImage": fleet.resolved_image, "ResolutionTime": now}
            ]
        summaries.append(summary)
    pending_summary["ProductionVariants"] = summaries
