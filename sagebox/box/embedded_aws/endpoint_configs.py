"""moto's SageMaker endpoint configs, accepted and refused as SageMaker does: patches 1 and 7 of
sagebox.box.embedded_aws.sagemaker, which installs them (every patch listed in infra/README.md).

1. Instance types: moto 5.2's enum predates ml.c6i, ml.inf2 and ml.trn1; real SageMaker accepts them. Endpoint
   configs accept every type of Sagebox's catalog and the current hosting families' usual sizes
   (`CURRENT_FAMILIES`); moto's own check stays for everything else, so a typo is still refused.
7. Endpoint types: moto dropped `ShadowProductionVariants` (from the API and from templates) and checked nothing of
   serverless and asynchronous configs but the memory size. Here endpoint configs keep their shadow variants and
   are refused as SageMaker refuses them (`check_endpoint_config`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpointConfig, SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

# Real-time hosting families newer than moto's enum (AWS, "Amazon SageMaker AI pricing", instance tables), with
# the sizes SageMaker uses for them.
CURRENT_FAMILIES = frozenset(
    {
        *("c6i", "c6in", "c7i", "c7g", "m6i", "m6g", "m7i", "m7g", "r6i", "r6g", "r7i", "g5", "g6", "g6e"),
        *("inf2", "trn1", "trn1n", "trn2", "p4d", "p4de", "p5", "t3"),
    }
)
SIZES = frozenset(
    {
        *("medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "9xlarge", "12xlarge", "16xlarge"),
        *("18xlarge", "24xlarge", "32xlarge", "48xlarge"),
    }
)


def accepting(accepted: set[str], original: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    """FakeEndpointConfig.validate_instance_type that also accepts `accepted` and the current families' types."""

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type not in accepted and not current_type(instance_type):
            original(self, instance_type)

    return validate_instance_type


def current_type(instance_type: str) -> bool:
    """`ml.<family>.<size>` of a hosting family newer than moto's list."""
    parts = instance_type.split(".")
    return len(parts) == 3 and parts[0] == "ml" and parts[1] in CURRENT_FAMILIES and parts[2] in SIZES


def keeping_shadows(original: Callable[..., FakeEndpointConfig]) -> Callable[..., FakeEndpointConfig]:
    """SageMakerModelBackend.create_endpoint_config that checks the config (`check_endpoint_config`) and keeps its
    shadow variants, around moto's `original`."""

    def create_endpoint_config(
        self: SageMakerModelBackend,
        endpoint_config_name: str,
        production_variants: list[dict[str, Any]],
        data_capture_config: dict[str, Any],
        async_inference_config: dict[str, Any],
        tags: list[dict[str, str]],
        kms_key_id: str,
        shadow_production_variants: list[dict[str, Any]] | None = None,
    ) -> FakeEndpointConfig:
        shadows = list(shadow_production_variants or [])
        check_endpoint_config(production_variants or [], shadows, async_inference_config, data_capture_config)
        self.validate_production_variants(shadows)  # their models exist
        config = original(
            self,
            endpoint_config_name=endpoint_config_name,
            production_variants=production_variants,
            data_capture_config=data_capture_config,
            async_inference_config=async_inference_config,
            tags=tags,
            kms_key_id=kms_key_id,
        )
        config.validate_production_variants(shadows)  # their instance types
        fields: Any = config
        fields.shadow_production_variants = shadows or None
        return config

    return create_endpoint_config


def create_endpoint_config_response(self: SageMakerResponse) -> ActionResult:
    """CreateEndpointConfig's answer, passing `ShadowProductionVariants` on."""
    config = self.sagemaker_backend.create_endpoint_config(  # type: ignore[call-arg]
        endpoint_config_name=self._get_param("EndpointConfigName"),
        async_inference_config=self._get_param("AsyncInferenceConfig"),
        production_variants=self._get_param("ProductionVariants"),
        data_capture_config=self._get_param("DataCaptureConfig"),
        tags=self._get_param("Tags"),
        kms_key_id=self._get_param("KmsKeyId"),
        shadow_production_variants=self._get_param("ShadowProductionVariants"),
    )
    return ActionResult({"EndpointConfigArn": config.endpoint_config_arn})


def endpoint_config_from_template(
    cls: type[FakeEndpointConfig],
    resource_name: str,
    cloudformation_json: Any,
    account_id: str,
    region_name: str,
    **kwargs: Any,
) -> FakeEndpointConfig:
    """AWS::SageMaker::EndpointConfig, `ShadowProductionVariants` included."""
    properties = cloudformation_json["Properties"]
    return sagemaker_backends[account_id][region_name].create_endpoint_config(  # type: ignore[call-arg]
        endpoint_config_name=resource_name,
        production_variants=properties["ProductionVariants"],
        data_capture_config=properties.get("DataCaptureConfig", {}),
        async_inference_config=properties.get("AsyncInferenceConfig", {}),
        kms_key_id=properties.get("KmsKeyId"),
        tags=properties.get("Tags", []),
        shadow_production_variants=properties.get("ShadowProductionVariants"),
    )


def check_endpoint_config(
    production: list[dict[str, Any]],
    shadows: list[dict[str, Any]],
    async_config: dict[str, Any] | None,
    capture: dict[str, Any] | None,
) -> None:
    """SageMaker's rules for the endpoint types, as ValidationErrors (CreateEndpointConfig's API reference;
    https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html feature exclusions;
    https://docs.aws.amazon.com/sagemaker/latest/dg/shadow-tests-exclusions.html)."""
    serverless = [v for v in production + shadows if v.get("ServerlessConfig")]
    for variant in serverless:
        config = variant["ServerlessConfig"]
        concurrency = config.get("MaxConcurrency")
        if concurrency is None or not 1 <= int(concurrency) <= 200:
            raise ValidationError(
                message=f"Value '{concurrency}' at 'MaxConcurrency' failed to satisfy constraint: Member must have "
                "value between 1 and 200"
            )
        if variant.get("InstanceType") or variant.get("InitialInstanceCount"):
            raise ValidationError(
                message=f"Variant {variant.get('VariantName')} sets ServerlessConfig and an instance type or count; "
                "a serverless variant has neither"
            )
    if serverless and len(production) > 1:
        raise ValidationError(message="A serverless endpoint config supports one production variant only")
    if serverless and capture and capture.get("EnableCapture") not in (None, False, "false"):
        raise ValidationError(message="Data capture is not supported for serverless endpoints")
    if shadows:
        if len(production) != 1 or len(shadows) != 1:
            raise ValidationError(
                message="An endpoint config with ShadowProductionVariants must have exactly one production variant "
                "and one shadow variant"
            )
        if serverless or async_config:
            kind = "serverless" if serverless else "asynchronous inference"
            raise ValidationError(message=f"Shadow variants are not supported for {kind} endpoints")
    if async_config:
        output = async_config.get("OutputConfig") or {}
        if not (output.get("S3OutputPath") or output.get("S3FailurePath")):
            raise ValidationError(message="AsyncInferenceConfig.OutputConfig must name an S3OutputPath")
        if serverless:
            raise ValidationError(message="Asynchronous inference is not supported for serverless endpoints")
    names = [str(v.get("VariantName")) for v in production + shadows]
    if len(set(names)) != len(names):
        raise ValidationError(message="Variant names must be unique within an endpoint config")
