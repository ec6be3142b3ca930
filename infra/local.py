"""Synthesize and deploy without the CDK CLI: into a moto server ("SageMaker in a box") or an account.

`synth_templates` builds bootstrapless templates (no BootstrapVersion rule, no assets: images and model
data are given as URIs). `deploy` and `destroy` drive an injected boto3 CloudFormation client and wait.
moto's gaps these functions live with (see infra/README.md): its SageMaker instance-type list predates
c6i/inf2/trn1 (callers patch it), it ignores `EndpointName` from templates (names come back from the stack
outputs), and it skips Application Auto Scaling, CloudWatch alarms and S3 bucket policies.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from botocore.parsers import ResponseParserError

from infra.errors import DeployError
from infra.settings import AppSettings
from infra.targets import Target, load_targets

Template = dict[str, Any]
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
DONE = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}
DELETED = "DELETE_COMPLETE"


def synth_templates(
    targets: Sequence[Target] | None,
    image_uri: str,
    model_data_urls: Mapping[str, str],
    *,
    prefix: str = "sagebox",
    cfn_validate: bool = False,
) -> dict[str, Template]:
    """Stack name -> template for the artifacts stack and one endpoint stack per target, in deployment order.

    `targets` None: the targets of infra/targets.json named in `model_data_urls`. Otherwise exactly `targets`,
    each with an s3:// model data URI from `model_data_urls` or its own definition.
    """
    from infra.app import build  # aws_cdk starts node: import it only when synthesizing

    chosen = [t for t in load_targets() if t.name in model_data_urls] if targets is None else list(targets)
    if not chosen:
        raise DeployError("no target to synthesize: model_data_urls names none of the targets")
    settings = AppSettings(
        prefix=prefix,
        local=True,
        image_uri=image_uri,
        model_data=dict(model_data_urls),
        only=tuple(t.name for t in chosen),
        cfn_validate=cfn_validate,
    )
    with tempfile.TemporaryDirectory(prefix="sagebox-cdk-") as outdir:
        assembly = build(settings, chosen, outdir=Path(outdir)).synth()
        templates = {stack.stack_name: stack.template for stack in assembly.stacks}
    return {name: templates[name] for name in deployment_order(templates)}


def _walk(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from _walk(child)


def deployment_order(templates: Mapping[str, Template]) -> list[str]:
    """Stacks ordered so each comes after the stacks whose exports it imports (input order otherwise)."""
    exporter = {
        output["Export"]["Name"]: name
        for name, template in templates.items()
        for output in template.get("Outputs", {}).values()
        if isinstance(output.get("Export", {}).get("Name"), str)
    }
    needs = {
        name: {
            exporter[node["Fn::ImportValue"]]
            for node in _walk(template)
            if isinstance(node, dict) and isinstance(node.get("Fn::ImportValue"), str)
            if node["Fn::ImportValue"] in exporter
        }
        - {name}
        for name, template in templates.items()
    }
    order: list[str] = []
    while len(order) < len(templates):
        ready = [n for n in templates if n not in order and needs[n] <= set(order)]
        if not ready:
            raise DeployError(
                f"stacks import each other's exports: {', '.join(n for n in templates if n not in order)}"
            )
        order.append(ready[0])
    return order


# The endpoint gave no parsable answer (moto answers 500 when a resource fails to create).
TRANSPORT_ERRORS = (BotoCoreError, ResponseParserError)


def _client_error(stack_name: str, exc: ClientError) -> DeployError:
    error = exc.response.get("Error", {})
    message = str(error.get("Message") or exc).splitlines()[0]
    return DeployError(f"stack {stack_name}: {error.get('Code', 'error')}: {message}")


def _transport_error(stack_name: str, exc: Exception) -> DeployError:
    first = (str(exc).splitlines() or [type(exc).__name__])[0].rstrip(":")
    return DeployError(f"stack {stack_name}: CloudFormation gave no usable answer: {first}")


def _describe(cloudformation: Any, stack_name: str) -> dict[str, Any] | None:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as exc:
        if "does not exist" in str(exc):
            return None
        raise _client_error(stack_name, exc) from None
    except TRANSPORT_ERRORS as exc:
        raise _transport_error(stack_name, exc) from None
    return dict(stacks[0]) if stacks else None


def _status(cloudformation: Any, stack_name: str) -> str | None:
    stack = _describe(cloudformation, stack_name)
    return None if stack is None else str(stack["StackStatus"])


def _failure_reason(cloudformation: Any, stack_name: str) -> str:
    try:
        events = cloudformation.describe_stack_events(StackName=stack_name)["StackEvents"]
    except (ClientError, *TRANSPORT_ERRORS):
        return "no stack events"
    failed = [e for e in events if str(e.get("ResourceStatus", "")).endswith("FAILED")]
    if not failed:
        return "no failed resource reported"
    first = failed[-1]  # events are newest first
    return f"{first.get('LogicalResourceId')}: {first.get('ResourceStatusReason', 'no reason given')}"


@dataclass(frozen=True)
class Waiting:
    timeout_s: float
    poll_s: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]


def _wait(
    cloudformation: Any, stack_name: str, success: set[str], waiting: Waiting, gone_is_success: bool = False
) -> None:
    clock, timeout_s = waiting.clock, waiting.timeout_s
    deadline = clock() + timeout_s
    while True:
        status = _status(cloudformation, stack_name)
        if status in success or (status is None and gone_is_success):
            return
        if status is None:
            raise DeployError(f"stack {stack_name} disappeared while waiting for {', '.join(sorted(success))}")
        if not status.endswith("_IN_PROGRESS"):
            reason = _failure_reason(cloudformation, stack_name)
            raise DeployError(f"stack {stack_name} ended {status}: {reason}")
        if clock() >= deadline:
            raise DeployError(f"stack {stack_name} still {status} after {timeout_s:g} s")
        waiting.sleep(waiting.poll_s)


def _delete(cloudformation: Any, stack_name: str, waiting: Waiting) -> None:
    try:
        cloudformation.delete_stack(StackName=stack_name)
    except ClientError as exc:
        raise _client_error(stack_name, exc) from None
    except TRANSPORT_ERRORS as exc:
        raise _transport_error(stack_name, exc) from None
    _wait(cloudformation, stack_name, {DELETED}, waiting, gone_is_success=True)


def deploy(
    cloudformation: Any,
    templates: Mapping[str, Template],
    *,
    timeout_s: float = 900.0,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, str]:
    """Create or update each stack in dependency order and wait; return target name -> endpoint name."""
    waiting = Waiting(timeout_s, poll_s, sleep, clock)
    for stack_name in deployment_order(templates):
        body = json.dumps(templates[stack_name])
        status = _status(cloudformation, stack_name)
        if status == "ROLLBACK_COMPLETE":  # a failed first create: CloudFormation only lets it be deleted
            _delete(cloudformation, stack_name, waiting)
            status = None
        call = cloudformation.create_stack if status is None else cloudformation.update_stack
        try:
            call(StackName=stack_name, TemplateBody=body, Capabilities=CAPABILITIES)
        except ClientError as exc:
            if "No updates are to be performed" not in str(exc):
                raise _client_error(stack_name, exc) from None
        except TRANSPORT_ERRORS as exc:
            raise _transport_error(stack_name, exc) from None
        _wait(cloudformation, stack_name, DONE, waiting)
    return endpoint_names(cloudformation, list(templates))


def endpoint_names(cloudformation: Any, stack_names: Sequence[str]) -> dict[str, str]:
    """Target name -> endpoint name, read from the stacks' outputs (moto generates its own endpoint names)."""
    names: dict[str, str] = {}
    for stack_name in stack_names:
        stack = _describe(cloudformation, stack_name)
        if stack is None:
            raise DeployError(f"stack {stack_name} does not exist")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
        if "TargetName" in outputs and "EndpointName" in outputs:
            names[outputs["TargetName"]] = outputs["EndpointName"]
    return names


def destroy(
    cloudformation: Any,
    stack_names: Sequence[str] | Mapping[str, Template],
    *,
    timeout_s: float = 900.0,
    poll_s: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Delete stacks, importers before exporters (give templates for that order, or names already ordered)."""
    order = deployment_order(stack_names) if isinstance(stack_names, Mapping) else list(stack_names)
    waiting = Waiting(timeout_s, poll_s, sleep, clock)
    for stack_name in reversed(order):
        if _status(cloudformation, stack_name) is not None:
            _delete(cloudformation, stack_name, waiting)
