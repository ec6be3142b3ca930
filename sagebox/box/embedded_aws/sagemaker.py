"""moto's SageMaker, made to behave as SageMaker does around endpoints (every patch listed in infra/README.md).

1. Instance types: moto 5.2's enum predates ml.c6i, ml.inf2 and ml.trn1; real SageMaker accepts them. Endpoint
   configs accept every type of Sagebox's catalog and the current hosting families' usual sizes
   (`CURRENT_FAMILIES`); moto's own check stays for everything else, so a typo is still refused.
2. Lifecycle: moto makes an endpoint InService the moment it is created, serving nothing. Here `CreateEndpoint`
   leaves it `Creating` and the box's control plane (the reconciler) moves it to `InService` once its containers
   answer /ping, or to `Failed` with a reason. A second `CreateEndpoint` of an existing name is refused, as
   SageMaker does ("Cannot create already existing endpoint").
3. `UpdateEndpoint` (missing from moto) with its `DeploymentConfig` (deployment guardrails),
   `RetainAllVariantProperties` and `RetainDeploymentConfig`: the endpoint turns `Updating` with the new config
   in `PendingDeploymentSummary` while `EndpointConfigName` stays the serving one until the update completes;
   `LastDeploymentConfig` keeps the policy. The control plane runs it as SageMaker does (sagebox.box.guardrails):
   the new fleet beside the old one, traffic shifted step by step, rollback (`RollingBack`, then `InService` on
   the old config with a `FailureReason`) when a rollback alarm fires. A policy SageMaker would refuse is a
   ValidationError, as is a rollback alarm that does not exist. CloudFormation updates of AWS::SageMaker::Endpoint
   call it with the template's DeploymentConfig (moto deleted and re-created the endpoint).
4. Templates: moto ignored `EndpointName` in AWS::SageMaker::Endpoint and generated one; here it is honoured.
5. Response shapes: moto answered `Describe*` with `VpcConfig: {}` or `DataCaptureConfig: {}` where SageMaker omits
   them, and the SageMaker SDK's strict response shapes reject those; here they are omitted. DescribeEndpoint's
   `DataCaptureConfig` was the endpoint config's (which the SDK's `Endpoint.get` refuses); here it is SageMaker's
   summary (`CaptureStatus: Started`: the runtime gateway captures the data).
6. `UpdateEndpointWeightsAndCapacities`: moto set the current weights and counts at once and stayed InService;
   here it sets the desired ones, the endpoint turns `Updating`, and the control plane starts or stops instances
   (autoscaling calls it too) before `CurrentInstanceCount`/`CurrentWeight` follow and it is `InService` again.
7. Endpoint types: moto dropped `ShadowProductionVariants` (from the API and from templates) and checked nothing of
   serverless and asynchronous configs but the memory size. Here endpoint configs keep their shadow variants and
   are refused as SageMaker refuses them: a shadow needs exactly one production and one shadow variant and no
   serverless or async config; a serverless variant's MaxConcurrency is 1-200, it names no instance type, is the
   only variant and captures no data; an AsyncInferenceConfig needs an OutputConfig with an S3 path and no
   serverless variant. DescribeEndpoint reports `ShadowProductionVariants` and `AsyncInferenceConfig` once the
   endpoint serves.

`changed` is called (from moto's request threads) whenever an endpoint is created, updated or deleted, so the
reconciler need not wait for its next poll.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig, SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

from sagebox.box.data_capture import CaptureConfig
from sagebox.box.guardrails import DeploymentPolicy, GuardrailError
from sagebox.box.specs import CREATING, FAILED, IN_SERVICE, UPDATING

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
# Statuses from which SageMaker accepts UpdateEndpoint.
UPDATABLE = {IN_SERVICE, FAILED}

_lock = threading.Lock()
_applied: set[str] = set()
_listeners: list[Callable[[str, str], None]] = []


@dataclass(frozen=True)
class UpdateRequest:
    """What UpdateEndpoint asked besides the config (kept on the endpoint as `box_update`, never described)."""

    retain_variant_properties: bool = False
    exclude_retained: tuple[str, ...] = ()


def _once(name: str) -> bool:
    with _lock:
        if name in _applied:
            return False
        _applied.add(name)
        return True


def _changed(kind: str, endpoint_name: str) -> None:
    for listener in list(_listeners):
        listener(kind, endpoint_name)


def on_change(listener: Callable[[str, str], None]) -> None:
    """Call `listener(kind, endpoint_name)` (on a moto request thread, before the API call answers) after every
    endpoint change; kind is "created", "updated" or "deleted"."""
    _listeners.append(listener)


def accept_instance_types(known: Iterable[str]) -> None:
    """Endpoint configs accept these instance types besides moto's own list (idempotent)."""
    accepted = set(known)
    if not _once("instance-types"):
        return
    original: Callable[[Any, str], None] = FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type not in accepted and not current_type(instance_type):
            original(self, instance_type)

    FakeEndpointConfig.validate_instance_type = validate_instance_type  # type: ignore[method-assign]


def current_type(instance_type: str) -> bool:
    """`ml.<family>.<size>` of a hosting family newer than moto's list."""
    parts = instance_type.split(".")
    return len(parts) == 3 and parts[0] == "ml" and parts[1] in CURRENT_FAMILIES and parts[2] in SIZES


def endpoint_lifecycle() -> None:
    """Creating/Updating until the control plane says otherwise; UpdateEndpoint; named endpoints (idempotent)."""
    if not _once("lifecycle"):
        return
    original_init = FakeEndpoint.__init__

    def __init__(self: FakeEndpoint, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.endpoint_status = CREATING
        fields: Any = self  # SageMaker's fields moto lacks (None: not described)
        fields.pending_deployment_summary = None
        fields.last_deployment_config = None
        fields.shadow_production_variants = None
        fields.async_inference_config = None
        fields.box_update = None

    FakeEndpoint.__init__ = __init__  # type: ignore[method-assign]
    FakeEndpoint.cloudformation_name_type = staticmethod(lambda: "EndpointName")  # type: ignore[method-assign]

    original_create = SageMakerModelBackend.create_endpoint

    def create_endpoint(
        self: SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str, tags: list[dict[str, str]]
    ) -> FakeEndpoint:
        if endpoint_name in self.endpoints:
            arn = FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
            raise ValidationError(message=f'Cannot create already existing endpoint "{arn}".')
        endpoint = original_create(self, endpoint_name, endpoint_config_name, tags)
        _changed("created", endpoint_name)
        return endpoint

    original_delete = SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: SageMakerModelBackend, endpoint_name: str) -> None:
        original_delete(self, endpoint_name)
        _changed("deleted", endpoint_name)

    def gen_response_object(self: FakeEndpoint) -> dict[str, Any]:
        return {
            self.camelCase(key) if "_" in key else key[0].upper() + key[1:]: value
            for key, value in self.__dict__.items()
            if not key.startswith("box_")
        }

    SageMakerModelBackend.create_endpoint = create_endpoint  # type: ignore[method-assign]
    SageMakerModelBackend.delete_endpoint = delete_endpoint  # type: ignore[method-assign]
    SageMakerModelBackend.update_endpoint = update_endpoint  # type: ignore[attr-defined]
    SageMakerModelBackend.update_endpoint_weights_and_capacities = update_weights_and_capacities  # type: ignore[method-assign]
    SageMakerResponse.update_endpoint = _update_endpoint_response  # type: ignore[attr-defined]
    FakeEndpoint.gen_response_object = gen_response_object  # type: ignore[method-assign,assignment]
    FakeEndpoint.update_from_cloudformation_json = classmethod(_update_from_cloudformation)  # type: ignore[method-assign,assignment]


def endpoint_config_features() -> None:
    """Shadow variants kept, serverless and async configs checked, from the API and from templates (idempotent)."""
    if not _once("endpoint-config-features"):
        return
    original_create = SageMakerModelBackend.create_endpoint_config

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
        config = original_create(
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

    def _create_response(self: SageMakerResponse) -> ActionResult:
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

    def _from_template(
        cls: type[FakeEndpointConfig],
        resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> FakeEndpointConfig:
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

    SageMakerModelBackend.create_endpoint_config = create_endpoint_config  # type: ignore[method-assign]
    SageMakerResponse.create_endpoint_config = _create_response  # type: ignore[method-assign]
    FakeEndpointConfig.create_from_cloudformation_json = classmethod(_from_template)  # type: ignore[method-assign,assignment]


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


def omit_empty_objects() -> None:
    """Describe* answers leave out settings that are not set, as SageMaker does (idempotent). Only the answers:
    moto's own code reads those keys from the same objects."""
    if not _once("empty-objects"):
        return
    for action in ("describe_model", "describe_endpoint_config", "describe_endpoint"):
        original = getattr(SageMakerResponse, action)

        def answer(self: SageMakerResponse, _original: Any = original) -> Any:
            result = _original(self)
            body = getattr(result, "result", None)
            if isinstance(body, dict):
                for key in [k for k, v in body.items() if v == {}]:
                    del body[key]
            return result

        setattr(SageMakerResponse, action, answer)


def capture_summary() -> None:
    """DescribeEndpoint answers `DataCaptureConfig` in its own shape, DataCaptureConfigSummary (EnableCapture,
    CaptureStatus, CurrentSamplingPercentage, DestinationS3Uri, KmsKeyId;
    https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DataCaptureConfigSummary.html), not the endpoint
    config's, which moto copied and the SageMaker SDK's `Endpoint.get` refuses. CaptureStatus is `Started` when
    capture is enabled: the runtime gateway writes the sampled invocations (sagebox.box.data_capture). Idempotent."""
    if not _once("capture-summary"):
        return
    original = SageMakerResponse.describe_endpoint

    def answer(self: SageMakerResponse) -> Any:
        result = original(self)
        body = getattr(result, "result", None)
        config = body.get("DataCaptureConfig") if isinstance(body, dict) else None
        if isinstance(body, dict) and isinstance(config, dict) and config:
            body["DataCaptureConfig"] = CaptureConfig.of(config).summary()
        return result

    SageMakerResponse.describe_endpoint = answer  # type: ignore[method-assign]


def _endpoint(backend: SageMakerModelBackend, endpoint_name: str) -> FakeEndpoint:
    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = FakeEndpoint.arn_formatter(endpoint_name, backend.account_id, backend.region_name)
        raise ValidationError(message=f"Could not find endpoint '{arn}'.")
    return endpoint


def _existing_alarms(account_id: str, region_name: str) -> set[str]:
    from moto.cloudwatch.models import cloudwatch_backends

    return set(cloudwatch_backends[account_id][region_name].alarms)


def update_endpoint(
    self: SageMakerModelBackend,
    endpoint_name: str,
    endpoint_config_name: str,
    deployment_config: dict[str, Any] | None = None,
    retain_all_variant_properties: bool = False,
    exclude_retained_variant_properties: list[dict[str, str]] | None = None,
    retain_deployment_config: bool = False,
) -> FakeEndpoint:
    """UpdateEndpoint: the endpoint keeps serving its current config while the new one is deployed by the control
    plane under `deployment_config` (or the last one, with `retain_deployment_config`)."""
    endpoint: Any = _endpoint(self, endpoint_name)
    if endpoint.endpoint_status not in UPDATABLE:
        raise ValidationError(
            message=f'Cannot update in-progress endpoint "{endpoint.arn}" (status {endpoint.endpoint_status}).'
        )
    config = self.describe_endpoint_config(endpoint_config_name)  # raises ValidationError when missing
    if deployment_config is None and retain_deployment_config:
        deployment_config = getattr(endpoint, "last_deployment_config", None)
    try:
        policy = DeploymentPolicy.from_config(deployment_config)
        for variant in config["ProductionVariants"]:
            policy.check_fleet(int(variant.get("InitialInstanceCount") or 1))
    except GuardrailError as exc:
        raise ValidationError(message=str(exc)) from None
    missing = [name for name in policy.alarms if name not in _existing_alarms(self.account_id, self.region_name)]
    if missing:
        raise ValidationError(message=f"The rollback alarm(s) {', '.join(missing)} do not exist in CloudWatch.")
    endpoint.pending_deployment_summary = {
        "EndpointConfigName": endpoint_config_name,
        "StartTime": datetime.datetime.now(datetime.UTC),
    }
    if deployment_config:
        endpoint.last_deployment_config = deployment_config
    endpoint.box_update = UpdateRequest(
        bool(retain_all_variant_properties),
        tuple(str(p.get("VariantPropertyType")) for p in exclude_retained_variant_properties or []),
    )
    endpoint.endpoint_status = UPDATING
    endpoint.failure_reason = None
    _changed("updated", endpoint_name)
    return endpoint


def update_weights_and_capacities(
    self: SageMakerModelBackend, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
) -> str:
    """UpdateEndpointWeightsAndCapacities: the desired weights and counts, which the control plane then runs."""
    endpoint = _endpoint(self, endpoint_name)
    if endpoint.endpoint_status != IN_SERVICE:
        raise ValidationError(
            message=f'Cannot update in-progress endpoint "{endpoint.arn}" (status {endpoint.endpoint_status}).'
        )
    variants = {v["VariantName"]: v for v in endpoint.production_variants}
    seen: set[str] = set()
    for wanted in desired_weights_and_capacities:
        name = str(wanted.get("VariantName"))
        if name in seen:
            raise ValidationError(message=f'The variant name "{name}" was non-unique within the request.')
        seen.add(name)
        if name not in variants:
            raise ValidationError(
                message=f'The variant name(s) "{name}" is/are not present within endpoint configuration '
                f'"{endpoint.endpoint_config_name}".'
            )
        count = wanted.get("DesiredInstanceCount")
        if count is not None and int(count) < 1:
            raise ValidationError(message=f"DesiredInstanceCount of variant {name} must be at least 1.")
    for wanted in desired_weights_and_capacities:
        variant = variants[str(wanted["VariantName"])]
        if wanted.get("DesiredInstanceCount") is not None:
            variant["DesiredInstanceCount"] = int(wanted["DesiredInstanceCount"])
        if wanted.get("DesiredWeight") is not None:
            variant["DesiredWeight"] = float(wanted["DesiredWeight"])
    endpoint.endpoint_status = UPDATING
    _changed("capacity", endpoint_name)
    return str(endpoint.arn)


def _update_endpoint_response(self: SageMakerResponse) -> ActionResult:
    endpoint = self.sagemaker_backend.update_endpoint(  # type: ignore[attr-defined]
        endpoint_name=self._get_param("EndpointName"),
        endpoint_config_name=self._get_param("EndpointConfigName"),
        deployment_config=self._get_param("DeploymentConfig"),
        retain_all_variant_properties=bool(self._get_param("RetainAllVariantProperties")),
        exclude_retained_variant_properties=self._get_param("ExcludeRetainedVariantProperties"),
        retain_deployment_config=bool(self._get_param("RetainDeploymentConfig")),
    )
    return ActionResult({"EndpointArn": endpoint.arn})


def _update_from_cloudformation(
    cls: type[FakeEndpoint],
    original_resource: FakeEndpoint,
    new_resource_name: str,
    cloudformation_json: Any,
    account_id: str,
    region_name: str,
) -> FakeEndpoint:
    backend = sagemaker_backends[account_id][region_name]
    properties = cloudformation_json["Properties"]
    config_name = properties["EndpointConfigName"]
    if config_name == original_resource.endpoint_config_name:
        return original_resource
    return update_endpoint(
        backend,
        original_resource.endpoint_name,
        config_name,
        deployment_config=properties.get("DeploymentConfig"),
        retain_all_variant_properties=_true(properties.get("RetainAllVariantProperties")),
        exclude_retained_variant_properties=properties.get("ExcludeRetainedVariantProperties"),
        retain_deployment_config=_true(properties.get("RetainDeploymentConfig")),
    )


def _true(value: Any) -> bool:
    """A CloudFormation boolean (true, or the string "true")."""
    return value is True or str(value).lower() == "true"
