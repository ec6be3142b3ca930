"""moto's CloudFormation, made to deploy what the CDK CLI sends (every patch listed in infra/README.md).

1. Change sets (`cdk deploy`'s default method): moto found a change set by its name alone (the CDK CLI gives
   every stack's change set the same name, so concurrent deploys executed each other's), kept executed change sets
   (CloudFormation removes a stack's change sets once one is executed), executed it without the
   region's exports (so
   `Fn::ImportValue` failed), registered neither the stack's outputs nor its exports, and answered a failed
   resource with a server error (HTTP 500) that left the stack half made. Here execution resolves imports,
   registers outputs and exports, and a failure ends the stack as CloudFormation ends it: a failed event with the
   reason, then `ROLLBACK_COMPLETE` (a first create, whose resources are deleted again) or
   `UPDATE_ROLLBACK_FAILED` (an update: moto cannot restore the old resources, and says so).
   A failed update rolls back (sagebox.box.embedded_aws.cfn_updates): `UPDATE_ROLLBACK_COMPLETE` with the previous
   template, outputs and resources, or `UPDATE_ROLLBACK_FAILED` when moto cannot restore something.
2. Endpoints: CloudFormation finishes an AWS::SageMaker::Endpoint only when the endpoint is InService on the
   template's config (and fails the stack when it fails, or when its update is rolled back by the deployment
   guardrails' alarms), so `cdk deploy` returns once the endpoint serves the new config. moto finished at once.
   Here a stack holding such an endpoint stays `*_IN_PROGRESS`; `settle()`, which the control plane calls after
   every endpoint status change, completes or fails it.
3. Updates (sagebox.box.embedded_aws.cfn_updates): in dependency order, a replacement updates what references it,
   replaced and removed resources are deleted only once the update succeeded, and a failed update is undone.
4. Deletes: CloudFormation cannot delete an S3 bucket that holds objects, so deleting its stack fails (the bucket's
   resource `DELETE_FAILED` with S3's BucketNotEmpty, the stack `DELETE_FAILED`) and `cdk destroy` says so; moto
   reported the stack deleted and left the bucket behind. Here the stack stays, `DELETE_FAILED` with the reason, and
   nothing of it is deleted (CloudFormation would already have deleted the resources nothing failed on); emptied,
   it deletes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from moto.cloudformation.models import CloudFormationBackend, Event, Stack, cloudformation_backends
from moto.cloudformation.parsing import ResourceMap
from moto.cloudformation.responses import CloudFormationResponse
from moto.core.responses import ActionResult, EmptyResult
from moto.sagemaker.models import FakeEndpoint

from sagebox.box import specs as sagemaker
from sagebox.box.embedded_aws import cfn_updates

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
    cfn_updates.apply()
    CloudFormationBackend.execute_change_set = _execute_change_set  # type: ignore[method-assign]
    CloudFormationResponse.describe_change_set = _describe_change_set  # type: ignore[method-assign]
    CloudFormationResponse.delete_change_set = _delete_change_set  # type: ignore[method-assign]
    original_create = Stack.create_resources
    original_update = Stack.update

    def create_resources(self: Stack) -> None:
        original_create(self)
        _hold_for_endpoints(self, "CREATE")

    def update(self: Stack, *args: Any, **kwargs: Any) -> None:
        _previous[self.stack_id] = self.template
        original_update(self, *args, **kwargs)
        if not _hold_for_endpoints(self, "UPDATE"):
            cfn_updates.commit(self.resource_map)

    Stack.create_resources = create_resources  # type: ignore[method-assign]
    Stack.update = update  # type: ignore[method-assign]
    original_delete = CloudFormationBackend.delete_stack

    def delete_stack(self: CloudFormationBackend, name_or_stack_id: str) -> None:
        stack = self.stacks.get(name_or_stack_id) or next(
            (s for s in self.stacks.values() if s.name == name_or_stack_id), None
        )
        full = _buckets_with_objects(stack) if stack is not None else []
        if stack is None or not full:
            original_delete(self, name_or_stack_id)
            return
        stack._add_stack_event("DELETE_IN_PROGRESS", resource_status_reason="User Initiated")
        for logical_id, bucket in full:
            stack.events.append(
                Event(
                    stack_id=stack.stack_id,
                    stack_name=stack.name,
                    logical_resource_id=logical_id,
                    physical_resource_id=bucket,
                    resource_type="AWS::S3::Bucket",
                    resource_status="DELETE_FAILED",
                    resource_status_reason="The bucket you tried to delete is not empty (Service: S3, Status Code: "
                    "409, Error Code: BucketNotEmpty)",
                    resource_properties=None,
                )
            )
        failed = ", ".join(logical_id for logical_id, _ in full)
        reason = f"The following resource(s) failed to delete: [{failed}]. "
        stack._add_stack_event("DELETE_FAILED", resource_status_reason=reason)
        stack.status = "DELETE_FAILED"
        stack.status_reason = reason  # type: ignore[attr-defined]  # DescribeStacks' StackStatusReason

    CloudFormationBackend.delete_stack = delete_stack  # type: ignore[method-assign]


def _buckets_with_objects(stack: Stack) -> list[tuple[str, str]]:
    """(logical id, bucket name) of the stack's S3 buckets that hold objects (or object versions) and are not kept
    by `DeletionPolicy: Retain`."""
    from moto.s3.models import FakeBucket

    template = stack.template_dict.get("Resources", {}) if isinstance(stack.template_dict, dict) else {}
    full = []
    for logical_id, resource in list(stack.resource_map._parsed_resources.items()):
        if not isinstance(resource, FakeBucket) or template.get(logical_id, {}).get("DeletionPolicy") == "Retain":
            continue
        if len(resource.keys):
            full.append((logical_id, resource.name))
    return full


def _find_change_set(backend: CloudFormationBackend, name: str, stack_name: str | None) -> Any:
    """By ARN, or by name within the stack: the CDK CLI names every stack's change set the same, and deploys
    stacks concurrently (moto matched the name alone and executed another stack's change set)."""
    if name in backend.change_sets:
        return backend.change_sets[name]
    return next(
        (
            cs
            for cs in reversed(list(backend.change_sets.values()))
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
    """DeleteChangeSet succeeds for a change set that is not there when its stack is: the CDK CLI deletes
    "cdk-deploy-change-set" before every deploy to an existing stack, "if it exists" (its cleanupOldChangeset), and
    after the box restored its state (no change sets kept) that stack has none."""
    from moto.cloudformation.exceptions import ValidationError

    backend = self.cloudformation_backend
    name, stack_name = self._get_param("ChangeSetName"), self._get_param("StackName")
    change_set = _find_change_set(backend, name, stack_name)
    if change_set is not None:
        backend.change_sets.pop(change_set.change_set_id, None)
    elif stack_name is None or not any(stack_name in (s.name, s.stack_id) for s in backend.stacks.values()):
        raise ValidationError(name)
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
    _previous[stack.stack_id] = stack.template
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
    # "After you execute a change, CloudFormation removes all change sets that are associated with the stack"
    # (AWS, "Execute a change set"); moto kept them, and the next one of the same name found the executed one.
    for key in [k for k, cs in self.change_sets.items() if cs.stack_id == stack.stack_id]:
        del self.change_sets[key]
    if not _hold_for_endpoints(stack, kind):
        cfn_updates.commit(stack.resource_map)
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
        stack._add_stack_event("UPDATE_ROLLBACK_IN_PROGRESS", resource_status_reason=reason)
        if cfn_updates.roll_back(stack.resource_map) and stack.stack_id in _previous:
            stack.template = _previous.pop(stack.stack_id)
            stack._parse_template()
            stack.description = stack.template_dict.get("Description")
            stack.output_map = stack._create_output_map()
            try:
                _register_exports(backend, stack)
            except Exception as exc:  # an export another stack took meanwhile
                log.warning("stack %s: exports not restored: %s", stack.name, _reason(exc))
            stack.status = "UPDATE_ROLLBACK_COMPLETE"
            stack._add_stack_event("UPDATE_ROLLBACK_COMPLETE")
        else:
            reason = f"{reason} (the embedded AWS could not restore every previous resource of the update)"
            stack.status = "UPDATE_ROLLBACK_FAILED"
            stack._add_stack_event("UPDATE_ROLLBACK_FAILED", resource_status_reason=reason)


def _endpoints(resource_map: ResourceMap) -> list[FakeEndpoint]:
    parsed = getattr(resource_map, "_parsed_resources", {})
    return [r for r in parsed.values() if isinstance(r, FakeEndpoint)]


_pending: dict[str, tuple[Stack, str, dict[str, str]]] = {}  # stack -> (stack, kind, endpoint -> its config)
_previous: dict[str, Any] = {}  # stack -> its template before the update under way


def _wanted_config(endpoint: FakeEndpoint) -> str:
    pending = getattr(endpoint, "pending_deployment_summary", None) or {}
    return str(pending.get("EndpointConfigName") or endpoint.endpoint_config_name)


def _hold_for_endpoints(stack: Stack, kind: str) -> bool:
    """Keep the stack in progress while any of its endpoints is not InService; True if it is held."""
    endpoints = _endpoints(stack.resource_map)
    waiting = [e for e in endpoints if e.endpoint_status != sagemaker.IN_SERVICE]
    if not waiting:
        return False
    if stack.events and stack.events[-1].resource_status == f"{kind}_COMPLETE":
        stack.events.pop()  # moto's own completion event came too early
    stack.status = f"{kind}_IN_PROGRESS"
    with _lock:
        _pending[stack.stack_id] = (stack, kind, {e.endpoint_name: _wanted_config(e) for e in endpoints})
    settle()
    return True


def settle() -> None:
    """Complete or fail every held stack whose endpoints have all settled (called by the control plane): each
    InService on the config the template asked for; a failed endpoint, or an update the endpoint rolled back,
    fails the stack."""
    with _lock:
        held = list(_pending.items())
    for stack_id, (stack, kind, wanted) in held:
        endpoints = _endpoints(stack.resource_map)
        failed = [e for e in endpoints if e.endpoint_status == sagemaker.FAILED]
        settled = all(e.endpoint_status == sagemaker.IN_SERVICE for e in endpoints)
        undone = [e for e in endpoints if e.endpoint_config_name != wanted.get(e.endpoint_name, e.endpoint_config_name)]
        if failed or (settled and undone):
            endpoint = (failed or undone)[0]
            what = "failed" if failed else "did not update"
            reason = f"Endpoint {endpoint.endpoint_name} {what}: {endpoint.failure_reason or 'no reason given'}"
            backend = cloudformation_backends[stack.account_id][stack.region_name]
            with _lock:
                _pending.pop(stack_id, None)
            _fail(backend, stack, kind, reason)
        elif settled:
            with _lock:
                _pending.pop(stack_id, None)
            cfn_updates.commit(stack.resource_map)
            _previous.pop(stack_id, None)
            stack.status = f"{kind}_COMPLETE"
            stack._add_stack_event(f"{kind}_COMPLETE")
