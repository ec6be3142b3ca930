"""moto's CloudFormation, made to deploy what the CDK CLI sends (every patch listed in infra/README.md).

1. Change sets (`cdk deploy`'s default method): moto found a change set by its name alone (the CDK CLI gives
   every stack's change set the same name, so concurrent deploys executed each other's), executed it without the
   region's exports (so
   `Fn::ImportValue` failed), registered neither the stack's outputs nor its exports, and answered a failed
   resource with a server error (HTTP 500) that left the stack half made. Here execution resolves imports,
   registers outputs and exports, and a failure ends the stack as CloudFormation ends it: a failed event with the
   reason, then `ROLLBACK_COMPLETE` (a first create, whose resources are deleted again) or
   `UPDATE_ROLLBACK_FAILED` (an update: moto cannot restore the old resources, and says so).
2. Endpoints: CloudFormation finishes an AWS::SageMaker::Endpoint only when the endpoint is InService (and fails
   the stack when it fails), so `cdk deploy` returns once the endpoint serves. moto finished at once. Here a
   stack holding an endpoint that is not InService stays `*_IN_PROGRESS`; `settle()`, which the control plane
   calls after every endpoint status change, completes or fails it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from moto.cloudformation.models import CloudFormationBackend, Stack, cloudformation_backends
from moto.cloudformation.parsing import ResourceMap
from moto.cloudformation.responses import CloudFormationResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.sagemaker.models import FakeEndpoint

from sagebox.box import specs as sagemaker

log = logging.getLogger("sagebox.aws")

_lock = threading.RLock()
_applied = False


def apply() -> None:
    """Install the patches (idempotent)."""
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    CloudFormationBackend.execute_change_set = _execute_change_set  # type: ignore[method-assign]
    CloudFormationResponse.describe_change_set = _describe_change_set  # type: ignore[method-assign]
    CloudFormationResponse.delete_change_set = _delete_change_set  # type: ignore[method-assign]
    original_create = Stack.create_resources
    original_update = Stack.update

    def create_resources(self: Stack) -> None:
        original_create(self)
        _hold_for_endpoints(self, "CREATE")

    def update(self: Stack, *args: Any, **kwargs: Any) -> None:
        original_update(self, *args, **kwargs)
        _hold_for_endpoints(self, "UPDATE")

    Stack.create_resources = create_resources  # type: ignore[method-assign]
    Stack.update = update  # type: ignore[method-assign]


def _find_change_set(backend: CloudFormationBackend, name: str, stack_name: str | None) -> Any:
    """By ARN, or by name within the stack: the CDK CLI names every stack's change set the same, and deploys
    stacks concurrently (moto matched the name alone and executed another stack's change set)."""
    if name in backend.change_sets:
        return backend.change_sets[name]
    return next(
        (
            cs
            for cs in backend.change_sets.values()
            if cs.change_set_name == name and stack_name in (None, cs.stack_name, cs.stack_id)
        ),
        None,
    )


def _named_change_set(response: CloudFormationResponse) -> Any:
    from moto.cloudformation.exceptions import ValidationError

    name = response._get_param("ChangeSetName")
    stack_name = response._get_param("StackName")
    change_set = _find_change_set(response.cloudformation_backend, name, stack_name)
    if change_set is None:
        raise ValidationError(name)
    return change_set


def _describe_change_set(self: CloudFormationResponse) -> ActionResult:
    return ActionResult(_named_change_set(self))


def _delete_change_set(self: CloudFormationResponse) -> EmptyResult:
    change_set = _named_change_set(self)
    self.cloudformation_backend.change_sets.pop(change_set.change_set_id, None)
    return EmptyResult()


def _execute_change_set(self: CloudFormationBackend, change_set_name: str, stack_name: str | None = None) -> None:
    from moto.cloudformation.exceptions import ValidationError

    change_set = _find_change_set(self, change_set_name, stack_name)
    if change_set is None:
        raise ValidationError(stack_name or change_set_name)
    stack: Stack = self.stacks[change_set.stack_id]
    kind = change_set.change_set_type  # CREATE | UPDATE
    stack.cross_stack_resources = self.exports
    stack.resource_map.cross_stack_resources = self.exports
    stack.status = f"{kind}_IN_PROGRESS"
    stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
    change_set.execution_status = "EXECUTE_IN_PROGRESS"
    try:
        change_set.apply()
        stack.template = change_set.template
        stack._parse_template()
        stack.description = stack.template_dict.get("Description")
        stack.output_map = stack._create_output_map()
        _register_exports(self, stack)
    except Exception as exc:  # moto raises whatever the failing resource raised
        change_set.execution_status = "EXECUTE_FAILED"
        _fail(self, stack, kind, _reason(exc))
        return
    change_set.execution_status = "EXECUTE_COMPLETE"
    if not _hold_for_endpoints(stack, kind):
        stack.status = f"{kind}_COMPLETE"
        stack._add_stack_event(f"{kind}_COMPLETE")


def _register_exports(backend: CloudFormationBackend, stack: Stack) -> None:
    from moto.cloudformation.exceptions import ValidationError

    mine = {name for name, export in backend.exports.items() if export.exporting_stack_id == stack.stack_id}
    new = {export.name: export for export in stack.exports}
    clash = sorted(name for name in new if name in backend.exports and name not in mine)
    if clash:
        raise ValidationError(stack.stack_id, message=f"Export with name {clash[0]} is already exported by a stack")
    for name in mine - set(new):
        backend.exports.pop(name, None)
    backend.exports.update(new)


def _reason(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    return " ".join(text.split())[:500]


def _fail(backend: CloudFormationBackend, stack: Stack, kind: str, reason: str) -> None:
    log.warning("stack %s failed: %s", stack.name, reason)
    stack._add_stack_event(f"{kind}_FAILED", resource_status_reason=reason)
    if kind == "CREATE":
        stack._add_stack_event("ROLLBACK_IN_PROGRESS", resource_status_reason=reason)
        try:
            stack.resource_map.delete()
        except Exception as exc:  # what could not be deleted stays, as with a failed real rollback
            log.warning("stack %s: rollback left resources behind: %s", stack.name, _reason(exc))
        for name in [n for n, e in backend.exports.items() if e.exporting_stack_id == stack.stack_id]:
            backend.exports.pop(name, None)
        # What is left is an empty stack: no resources to describe, no outputs to resolve.
        stack.template_dict = {"Resources": {}}
        stack.resource_map = stack._create_resource_map()
        stack.output_map = stack._create_output_map()
        stack.status = "ROLLBACK_COMPLETE"
        stack._add_stack_event("ROLLBACK_COMPLETE")
    else:
        reason = f"{reason} (the embedded AWS cannot restore the previous resources of an update)"
        stack.status = "UPDATE_ROLLBACK_FAILED"
        stack._add_stack_event("UPDATE_ROLLBACK_FAILED", resource_status_reason=reason)


def _endpoints(resource_map: ResourceMap) -> list[FakeEndpoint]:
    parsed = getattr(resource_map, "_parsed_resources", {})
    return [r for r in parsed.values() if isinstance(r, FakeEndpoint)]


_pending: dict[str, tuple[Stack, str]] = {}


def _hold_for_endpoints(stack: Stack, kind: str) -> bool:
    """Keep the stack in progress while any of its endpoints is not InService; True if it is held."""
    waiting = [e for e in _endpoints(stack.resource_map) if e.endpoint_status != sagemaker.IN_SERVICE]
    if not waiting:
        return False
    if stack.events and stack.events[-1].resource_status == f"{kind}_COMPLETE":
        stack.events.pop()  # moto's own completion event came too early
    stack.status = f"{kind}_IN_PROGRESS"
    with _lock:
        _pending[stack.stack_id] = (stack, kind)
    settle()
    return True


def settle() -> None:
    """Complete or fail every held stack whose endpoints have all settled (called by the control plane)."""
    with _lock:
        held = list(_pending.items())
    for stack_id, (stack, kind) in held:
        endpoints = _endpoints(stack.resource_map)
        failed = [e for e in endpoints if e.endpoint_status == sagemaker.FAILED]
        if failed:
            reason = f"Endpoint {failed[0].endpoint_name} failed: {failed[0].failure_reason or 'no reason given'}"
            backend = cloudformation_backends[stack.account_id][stack.region_name]
            with _lock:
                _pending.pop(stack_id, None)
            _fail(backend, stack, kind, reason)
        elif all(e.endpoint_status == sagemaker.IN_SERVICE for e in endpoints):
            with _lock:
                _pending.pop(stack_id, None)
            stack.status = f"{kind}_COMPLETE"
            stack._add_stack_event(f"{kind}_COMPLETE")
