"""What an endpoint should be running, read from the embedded SageMaker: endpoint -> config -> variants -> models.

This is SageMaker's own data model, as `DescribeEndpoint`, `DescribeEndpointConfig` and `DescribeModel` give it;
the control plane deploys exactly this, whoever created it (cdk, boto3, the SageMaker SDK, Terraform).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# EndpointStatus values the box uses (SageMaker's DescribeEndpoint).
CREATING, UPDATING, IN_SERVICE, FAILED = "Creating", "Updating", "InService", "Failed"
ROLLING_BACK = "RollingBack"
# SageMaker's default for ContainerStartupHealthCheckTimeoutInSeconds when a variant does not set it.
DEFAULT_STARTUP_TIMEOUT_S = 600


class SpecError(ValueError):
    """An endpoint whose config or model cannot be deployed (becomes the endpoint's FailureReason)."""


@dataclass(frozen=True)
class VariantSpec:
    name: str
    model_name: str
    image: str
    model_data_url: str | None
    environment: Mapping[str, str]
    instance_type: str
    instance_count: int
    weight: float
    startup_timeout_s: int

    def key(self) -> tuple[Any, ...]:
        """What makes two variants the same deployment (a change here means new instances)."""
        return (self.name, self.image, self.model_data_url, tuple(sorted(self.environment.items())))


@dataclass(frozen=True)
class Capacity:
    """What UpdateEndpointWeightsAndCapacities (or autoscaling) asks of a running variant."""

    variant: str
    instances: int | None
    weight: float | None


@dataclass(frozen=True)
class EndpointSpec:
    name: str
    config_name: str  # the config to run: an update's new config while it is pending, else the endpoint's
    status: str
    variants: tuple[VariantSpec, ...]
    serving_config: str = ""  # DescribeEndpoint's EndpointConfigName: the config that serves now
    deployment: Mapping[str, Any] | None = None  # the pending update's DeploymentConfig
    retain_variant_properties: bool = False  # the pending update keeps the running instance counts and weights
    desired: tuple[Capacity, ...] = ()
    update_pending: bool = False  # UpdateEndpoint was called (even to the config that serves: a redeploy)


def variant_spec(variant: Mapping[str, Any], model: Mapping[str, Any]) -> VariantSpec:
    container = dict(model.get("PrimaryContainer") or {})
    if not container and model.get("Containers"):
        containers = list(model["Containers"])
        if len(containers) > 1:
            raise SpecError(
                f"model {model.get('ModelName')}: the box serves one container per model, not an inference pipeline"
            )
        container = dict(containers[0])
    image = container.get("Image")
    if not image:
        raise SpecError(f"model {model.get('ModelName')} names no container image")
    if variant.get("ServerlessConfig"):
        raise SpecError(f"variant {variant['VariantName']}: serverless variants are not served by the box yet")
    return VariantSpec(
        name=str(variant["VariantName"]),
        model_name=str(variant["ModelName"]),
        image=str(image),
        model_data_url=container.get("ModelDataUrl") or None,
        environment={str(k): str(v) for k, v in (container.get("Environment") or {}).items()},
        instance_type=str(variant.get("InstanceType", "")),
        instance_count=max(1, int(variant.get("InitialInstanceCount") or 1)),
        weight=float(variant.get("InitialVariantWeight", 1.0) or 0.0),
        startup_timeout_s=int(variant.get("ContainerStartupHealthCheckTimeoutInSeconds") or DEFAULT_STARTUP_TIMEOUT_S),
    )


def _desired(endpoint: Any) -> tuple[Capacity, ...]:
    out = []
    for variant in getattr(endpoint, "production_variants", None) or []:
        count, weight = variant.get("DesiredInstanceCount"), variant.get("DesiredWeight")
        out.append(
            Capacity(
                str(variant.get("VariantName", "")),
                None if count is None else int(count),
                None if weight is None else float(weight),
            )
        )
    return tuple(out)


def read_endpoints(backend: Any) -> dict[str, EndpointSpec | SpecError]:
    """Every endpoint of a moto SageMaker backend: its spec, or why it cannot be deployed. An endpoint with an
    update pending (UpdateEndpoint's PendingDeploymentSummary) is read with the update's config."""
    found: dict[str, EndpointSpec | SpecError] = {}
    for name, endpoint in list(backend.endpoints.items()):
        try:
            pending = getattr(endpoint, "pending_deployment_summary", None) or {}
            wanted = str(pending.get("EndpointConfigName") or endpoint.endpoint_config_name)
            config = backend.describe_endpoint_config(wanted)
            variants = []
            for variant in config["ProductionVariants"]:
                model = backend.describe_model(variant["ModelName"]).response_object
                variants.append(variant_spec(variant, model))
            update = getattr(endpoint, "box_update", None)
            found[name] = EndpointSpec(
                name,
                wanted,
                endpoint.endpoint_status,
                tuple(variants),
                serving_config=str(endpoint.endpoint_config_name),
                deployment=getattr(endpoint, "last_deployment_config", None) if pending else None,
                retain_variant_properties=bool(pending and update is not None and update.retain_variant_properties),
                desired=_desired(endpoint),
                update_pending=bool(pending),
            )
        except SpecError as exc:
            found[name] = exc
        except Exception as exc:  # moto's ValidationError: a config or model deleted under the endpoint
            found[name] = SpecError(str(getattr(exc, "message", "") or exc))
    return found
