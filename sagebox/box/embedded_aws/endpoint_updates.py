"""moto's SageMaker endpoint updates, as SageMaker runs them: patches 3 and 6 of sagebox.box.embedded_aws.sagemaker,
which installs them and tells the control plane of each change (every patch listed in infra/README.md).

3. `UpdateEndpoint` (missing from moto) with its `DeploymentConfig` (deployment guardrails),
   `RetainAllVariantProperties` and `RetainDeploymentConfig` (`update_endpoint`); CloudFormation updates of
   AWS::SageMaker::Endpoint call it with the template's DeploymentConfig (`update_from_cloudformation`).
6. `UpdateEndpointWeightsAndCapacities` sets the desired weights and counts, which the control plane then runs
   (`update_weights_and_capacities`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpoint, SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

from sagebox.box.guardrails import DeploymentPolicy, GuardrailError
from sagebox.box.specs import FAILED, IN_SERVICE, UPDATING

# Statuses from which SageMaker accepts UpdateEndpoint.
UPDATABLE = {IN_SERVICE, FAILED}


@dataclass(frozen=True)
class UpdateRequest:
    """What UpdateEndpoint asked besides the config (kept on the endpoint as `box_update`, never described)."""

    retain_variant_properties: bool = False
    exclude_retained: tuple[str, ...] = ()


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
    return str(endpoint.arn)


def update_endpoint_response(self: SageMakerResponse) -> ActionResult:
    """UpdateEndpoint's answer (through the backend's patched `update_endpoint`)."""
    endpoint = self.sagemaker_backend.update_endpoint(  # type: ignore[attr-defined]
        endpoint_name=self._get_param("EndpointName"),
        endpoint_config_name=self._get_param("EndpointConfigName"),
        deployment_config=self._get_param("DeploymentConfig"),
        retain_all_variant_properties=bool(self._get_param("RetainAllVariantProperties")),
        exclude_retained_variant_properties=self._get_param("ExcludeRetainedVariantProperties"),
        retain_deployment_config=bool(self._get_param("RetainDeploymentConfig")),
    )
    return ActionResult({"EndpointArn": endpoint.arn})


def update_from_cloudformation(
    cls: type[FakeEndpoint],
    original_resource: FakeEndpoint,
    new_resource_name: str,
    cloudformation_json: Any,
    account_id: str,
    region_name: str,
) -> FakeEndpoint:
    """AWS::SageMaker::Endpoint with a new EndpointConfigName: UpdateEndpoint (through the backend's patched
    `update_endpoint`) with the template's DeploymentConfig, where moto deleted and re-created the endpoint."""
    backend = sagemaker_backends[account_id][region_name]
    properties = cloudformation_json["Properties"]
    config_name = properties["EndpointConfigName"]
    if config_name == original_resource.endpoint_config_name:
        return original_resource
    endpoint: FakeEndpoint = backend.update_endpoint(  # type: ignore[attr-defined]
        original_resource.endpoint_name,
        config_name,
        deployment_config=properties.get("DeploymentConfig"),
        retain_all_variant_properties=_true(properties.get("RetainAllVariantProperties")),
        exclude_retained_variant_properties=properties.get("ExcludeRetainedVariantProperties"),
        retain_deployment_config=_true(properties.get("RetainDeploymentConfig")),
    )
    return endpoint


def _true(value: Any) -> bool:
    """A CloudFormation boolean (true, or the string "true")."""
    return value is True or str(value).lower() == "true"
