"""moto's SageMaker, made to behave as SageMaker does around endpoints (every patch listed in infra/README.md).

1. Instance types: moto 5.2's enum predates ml.c6i, ml.inf2 and ml.trn1; real SageMaker accepts them. Endpoint
   configs accept every type of Sagebox's catalog and the current hosting families' usual sizes
   (`CURRENT_FAMILIES`); moto's own check stays for everything else, so a typo is still refused.
2. Lifecycle: moto makes an endpoint InService the moment it is created, serving nothing. Here `CreateEndpoint`
   leaves it `Creating` and the box's control plane (the reconciler) moves it to `InService` once its containers
   answer /ping, or to `Failed` with a reason. A second `CreateEndpoint` of an existing name is refused, as
   SageMaker does ("Cannot create already existing endpoint").
3. `UpdateEndpoint` (missing from moto): switches the endpoint to a new endpoint config and marks it `Updating`;
   the reconciler deploys the new config beside the old one and flips traffic when it is healthy. CloudFormation
   updates of AWS::SageMaker::Endpoint call it (moto deleted and re-created the endpoint).
4. Templates: moto ignored `EndpointName` in AWS::SageMaker::Endpoint and generated one; here it is honoured.
5. Empty objects: moto answered `Describe*` with `VpcConfig: {}` or `DataCaptureConfig: {}` where SageMaker omits
   them, and the SageMaker SDK's strict response shapes reject those; here they are omitted.

`changed` is called (from moto's request threads) whenever an endpoint is created, updated or deleted, so the
reconciler need not wait for its next poll.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.core.responses import ActionResult
from moto.sagemaker.exceptions import ValidationError
from moto.sagemaker.models import FakeEndpoint, FakeEndpointConfig, SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse

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

    SageMakerModelBackend.create_endpoint = create_endpoint  # type: ignore[method-assign]
    SageMakerModelBackend.delete_endpoint = delete_endpoint  # type: ignore[method-assign]
    SageMakerModelBackend.update_endpoint = update_endpoint  # type: ignore[attr-defined]
    SageMakerResponse.update_endpoint = _update_endpoint_response  # type: ignore[attr-defined]
    FakeEndpoint.update_from_cloudformation_json = classmethod(_update_from_cloudformation)  # type: ignore[method-assign,assignment]


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


def update_endpoint(self: SageMakerModelBackend, endpoint_name: str, endpoint_config_name: str) -> FakeEndpoint:
    """UpdateEndpoint: the endpoint keeps serving its current config while the new one is deployed."""
    endpoint = self.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
        raise ValidationError(message=f"Could not find endpoint '{arn}'.")
    if endpoint.endpoint_status not in UPDATABLE:
        raise ValidationError(
            message=f'Cannot update in-progress endpoint "{endpoint.arn}" (status {endpoint.endpoint_status}).'
        )
    self.describe_endpoint_config(endpoint_config_name)  # raises ValidationError when missing
    endpoint.endpoint_config_name = endpoint_config_name
    endpoint.endpoint_status = UPDATING
    endpoint.failure_reason = None
    _changed("updated", endpoint_name)
    return endpoint


def _update_endpoint_response(self: SageMakerResponse) -> ActionResult:
    endpoint = self.sagemaker_backend.update_endpoint(  # type: ignore[attr-defined]
        endpoint_name=self._get_param("EndpointName"),
        endpoint_config_name=self._get_param("EndpointConfigName"),
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
    config_name = cloudformation_json["Properties"]["EndpointConfigName"]
    if config_name == original_resource.endpoint_config_name:
        return original_resource
    return update_endpoint(backend, original_resource.endpoint_name, config_name)
