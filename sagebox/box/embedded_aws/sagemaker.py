"""moto's SageMaker, made to behave as SageMaker does around endpoints (every patch listed in infra/README.md).

This module installs all seven patches and holds 2, 4 and 5 and the change listener; sagebox.box.embedded_aws's
endpoint_configs holds 1 and 7, its endpoint_updates 3 and 6.

1. Instance types (endpoint_configs): moto 5.2's enum predates ml.c6i, ml.inf2 and ml.trn1; real SageMaker accepts
   them. Endpoint configs accept every type of Sagebox's catalog and the current hosting families' usual sizes
   (`CURRENT_FAMILIES`); moto's own check stays for everything else, so a typo is still refused.
2. Lifecycle: moto makes an endpoint InService the moment it is created, serving nothing. Here `CreateEndpoint`
   leaves it `Creating` and the box's control plane (the reconciler) moves it to `InService` once its containers
   answer /ping, or to `Failed` with a reason. A second `CreateEndpoint` of an existing name is refused, as
   SageMaker does ("Cannot create already existing endpoint").
3. `UpdateEndpoint` (endpoint_updates; missing from moto) with its `DeploymentConfig` (deployment guardrails),
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
6. `UpdateEndpointWeightsAndCapacities` (endpoint_updates): moto set the current weights and counts at once and
   stayed InService; here it sets the desired ones, the endpoint turns `Updating`, and the control plane starts or
   stops instances (autoscaling calls it too) before `CurrentInstanceCount`/`CurrentWeight` follow and it is
   `InService` again.
7. Endpoint types (endpoint_configs): moto dropped `ShadowProductionVariants` (from the API and from templates) and
   checked nothing of serverless and asynchronous configs but the memory size. Here endpoint configs keep their
   shadow variants and are refused as SageMaker refuses them: a shadow needs exactly one production and one shadow
   variant and no serverless or async config; a serverless variant's MaxConcurrency is 1-200, it names no instance
   type, is the only variant and captures no data; an AsyncInferenceConfig needs an OutputConfig with an S3 path
   and no serverless variant. DescribeEndpoint reports `ShadowProductionVariants` and `AsyncInferenceConfig` once
   the endpoint serves.

`changed` is called (from moto's request threads) whenever an endpoint is created, updated or deleted, so the
reconciler need not wait for its next poll; the backend methods installed here call it, the update ones after
endpoint_updates' UpdateEndpoint or UpdateEndpointWeightsAndCapacities has succeeded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig, SageMakerModelBackend
from moto.sagemaker.responses import SageMakerResponse

from sagebox.box.data_capture import CaptureConfig
from sagebox.box.embedded_aws import endpoint_configs, endpoint_updates
from sagebox.box.specs import CREATING

_lock = threading.Lock()
_applied: set[str] = set()
_listeners: list[Callable[[str, str], None]] = []


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
    FakeEndpointConfig.validate_instance_type = endpoint_configs.accepting(accepted, original)  # type: ignore[method-assign,assignment]


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

    def update_endpoint(
        self: SageMakerModelBackend,
        endpoint_name: str,
        endpoint_config_name: str,
        deployment_config: dict[str, Any] | None = None,
        retain_all_variant_properties: bool = False,
        exclude_retained_variant_properties: list[dict[str, str]] | None = None,
        retain_deployment_config: bool = False,
    ) -> FakeEndpoint:
        endpoint = endpoint_updates.update_endpoint(
            self,
            endpoint_name,
            endpoint_config_name,
            deployment_config,
            retain_all_variant_properties,
            exclude_retained_variant_properties,
            retain_deployment_config,
        )
        _changed("updated", endpoint_name)
        return endpoint

    def update_weights_and_capacities(
        self: SageMakerModelBackend, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
    ) -> str:
        arn = endpoint_updates.update_weights_and_capacities(self, endpoint_name, desired_weights_and_capacities)
        _changed("capacity", endpoint_name)
        return arn

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
    SageMakerResponse.update_endpoint = endpoint_updates.update_endpoint_response  # type: ignore[attr-defined]
    FakeEndpoint.gen_response_object = gen_response_object  # type: ignore[method-assign,assignment]
    FakeEndpoint.update_from_cloudformation_json = classmethod(endpoint_updates.update_from_cloudformation)  # type: ignore[method-assign,assignment]


def endpoint_config_features() -> None:
    """Shadow variants kept, serverless and async configs checked, from the API and from templates (idempotent)."""
    if not _once("endpoint-config-features"):
        return
    original_create = SageMakerModelBackend.create_endpoint_config
    SageMakerModelBackend.create_endpoint_config = endpoint_configs.keeping_shadows(original_create)  # type: ignore[method-assign]
    SageMakerResponse.create_endpoint_config = endpoint_configs.create_endpoint_config_response  # type: ignore[method-assign]
    FakeEndpointConfig.create_from_cloudformation_json = classmethod(endpoint_configs.endpoint_config_from_template)  # type: ignore[method-assign,assignment]


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
