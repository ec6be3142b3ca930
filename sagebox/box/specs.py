"""What an endpoint should be running, read from the embedded SageMaker: endpoint -> config -> variants -> models.

This is SageMaker's own data model, as `DescribeEndpoint`, `DescribeEndpointConfig` and `DescribeModel` give it;
the control plane deploys exactly this, whoever created it (cdk, boto3, the SageMaker SDK, Terraform): production
variants (weighted), shadow variants (ShadowProductionVariants), serverless variants (ServerlessConfig), an
endpoint's AsyncInferenceConfig and its DataCaptureConfig.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sagebox.box.data_capture import CaptureConfig

# EndpointStatus values the box uses (SageMaker's DescribeEndpoint).
CREATING, UPDATING, IN_SERVICE, FAILED = "Creating", "Updating", "InService", "Failed"
ROLLING_BACK = "RollingBack"
# SageMaker's default for ContainerStartupHealthCheckTimeoutInSeconds when a variant does not set it.
DEFAULT_STARTUP_TIMEOUT_S = 600


class SpecError(ValueError):
    """An endpoint whose config or model cannot be deployed (becomes the endpoint's FailureReason)."""


@dataclass(frozen=True)
class Serverless:
    """A serverless variant's ServerlessConfig: its memory (a container's memory limit) and how many invocations
    it serves at once (more are throttled)."""

    memory_mb: int
    max_concurrency: int


@dataclass(frozen=True)
class AsyncConfig:
    """AsyncInferenceConfig: where answers (`<inference id>.out`) and failures (`<inference id>-error.out`) go, the
    SNS topics that hear of them, and how many requests one instance takes at once (None: SageMaker chooses)."""

    output_path: str
    failure_path: str | None = None
    success_topic: str | None = None
    error_topic: str | None = None
    max_concurrent_per_instance: int | None = None
    include_response_in: tuple[str, ...] = ()

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> AsyncConfig:
        output = dict(raw.get("OutputConfig") or {})
        notify = dict(output.get("NotificationConfig") or {})
        client = dict(raw.get("ClientConfig") or {})
        path = output.get("S3OutputPath") or output.get("S3FailurePath")
        if not path:
            raise SpecError("AsyncInferenceConfig.OutputConfig names no S3OutputPath")
        per_instance = client.get("MaxConcurrentInvocationsPerInstance")
        return cls(
            output_path=str(path).rstrip("/"),
            failure_path=str(output["S3FailurePath"]).rstrip("/") if output.get("S3FailurePath") else None,
            success_topic=notify.get("SuccessTopic") or None,
            error_topic=notify.get("ErrorTopic") or None,
            max_concurrent_per_instance=int(per_instance) if per_instance else None,
            include_response_in=tuple(str(t) for t in notify.get("IncludeInferenceResponseIn") or ()),
        )

    def describe(self) -> dict[str, Any]:
        """As DescribeEndpoint/DescribeEndpointConfig answer it."""
        output: dict[str, Any] = {"S3OutputPath": self.output_path}
        if self.failure_path:
            output["S3FailurePath"] = self.failure_path
        notify = {k: v for k, v in (("SuccessTopic", self.success_topic), ("ErrorTopic", self.error_topic)) if v}
        if notify:
            output["NotificationConfig"] = notify
        described: dict[str, Any] = {"OutputConfig": output}
        if self.max_concurrent_per_instance:
            described["ClientConfig"] = {"MaxConcurrentInvocationsPerInstance": self.max_concurrent_per_instance}
        return described


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
    shadow: bool = False  # a ShadowProductionVariant: gets copies of production's requests, answers nobody
    serverless: Serverless | None = None

    def key(self) -> tuple[Any, ...]:
        """What makes two variants the same deployment (a change here means new instances)."""
        return (
            self.name,
            self.image,
            self.model_data_url,
            tuple(sorted(self.environment.items())),
            self.shadow,
            self.serverless,
        )


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
    async_config: AsyncConfig | None = None
    capture: CaptureConfig | None = None  # the config's DataCaptureConfig

    @property
    def production(self) -> tuple[VariantSpec, ...]:
        return tuple(v for v in self.variants if not v.shadow)

    @property
    def shadows(self) -> tuple[VariantSpec, ...]:
        return tuple(v for v in self.variants if v.shadow)


def variant_spec(variant: Mapping[str, Any], model: Mapping[str, Any], shadow: bool = False) -> VariantSpec:
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
    serverless = variant.get("ServerlessConfig")
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
        shadow=shadow,
        serverless=(
            Serverless(int(serverless["MemorySizeInMB"]), int(serverless["MaxConcurrency"])) if serverless else None
        ),
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
            for variant in config.get("ShadowProductionVariants") or []:
                model = backend.describe_model(variant["ModelName"]).response_object
                variants.append(variant_spec(variant, model, shadow=True))
            raw_async = config.get("AsyncInferenceConfig")
            raw_capture = config.get("DataCaptureConfig")
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
                async_config=AsyncConfig.of(raw_async) if raw_async else None,
                capture=CaptureConfig.of(raw_capture) if raw_capture else None,
            )
        except SpecError as exc:
            found[name] = exc
        except Exception as exc:  # moto's ValidationError: a config or model deleted under the endpoint
            found[name] = SpecError(str(getattr(exc, "message", "") or exc))
    return found
