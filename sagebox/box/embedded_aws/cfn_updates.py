"""Stack updates as CloudFormation runs them, in place of moto's ResourceMap.update (listed in infra/README.md).

moto updated only resources whose template text changed, in template order, deleted replaced and removed resources
at once, and could not undo anything. So `cdk deploy` of a new model changed the Model resource alone (the
EndpointConfig and Endpoint name it through Fn::GetAtt, whose text does not change) and the endpoint never saw the
new model; and the old EndpointConfig was deleted while the endpoint still served it. CloudFormation instead
(AWS, "Update behaviors of stack resources"; "Monitor and roll back stack operations"):

- updates resources in dependency order, and a resource whose physical ID changed (a replacement) makes every
  resource that references it (Ref, Fn::GetAtt, Fn::Sub, DependsOn) update too;
- deletes replaced and removed resources only once the update has succeeded (its cleanup phase);
- on failure, rolls back: resources the update created are deleted, the previous ones (still there) are put back,
  resources updated in place are updated again with their previous properties.

`update` records a `Transaction` on the resource map; `commit` and `roll_back` end it (sagebox's CloudFormation
patch calls them when the stack completes or fails, which for a stack holding endpoints is when they settle).
moto's SageMaker Model and EndpointConfig deleted the original inside their own update; here they only create the
replacement, so that the deletion waits for the cleanup phase.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation.parsing import ResourceMap, parse_and_update_resource

log = logging.getLogger("sagebox.aws")


@dataclass
class Transaction:
    template: dict[str, Any]
    json_map: dict[str, Any]
    parsed: dict[str, Any]
    created: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)  # deleted on rollback
    obsolete: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)  # deleted on commit
    in_place: list[str] = field(default_factory=list)  # updated again with the old properties on rollback


def physical_id(resource: Any) -> Any:
    return getattr(resource, "physical_resource_id", None) if resource is not None else None


def references(value: Any) -> set[str]:
    """Logical IDs a resource's JSON names: Ref, Fn::GetAtt, ${X} / ${X.Attr} of Fn::Sub, DependsOn."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                target = inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
                found.add(str(target))
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                found.update(part.split("}")[0].split(".")[0] for part in str(text).split("${")[1:])
                if isinstance(inner, list) and len(inner) > 1:
                    found.update(references(inner[1]))
            elif key == "DependsOn":
                found.update([inner] if isinstance(inner, str) else list(inner))
            else:
                found.update(references(inner))
    elif isinstance(value, list):
        for item in value:
            found.update(references(item))
    return found


def dependency_order(resources: dict[str, Any]) -> list[str]:
    """Logical IDs, each after every resource of the template it references (cycles keep template order)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2 or name not in resources:
            return
        if state.get(name) == 1:
            return  # a cycle: CloudFormation would refuse the template; keep going in template order
        state[name] = 1
        for dependency in sorted(references(resources[name])):
            visit(dependency)
        state[name] = 2
        order.append(name)

    for name in resources:
        visit(name)
    return order


def update(self: ResourceMap, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
    old_map = dict(self._resource_json_map)
    tx = Transaction(self._template, old_map, dict(self._parsed_resources))
    self.box_transaction = tx  # type: ignore[attr-defined]
    self._template = template
    if parameters:
        self.input_parameters = parameters
    self.load_mapping()
    self.load_parameters()
    self.load_conditions()
    new_map = template["Resources"]
    self._resource_json_map = new_map
    changed: set[str] = set()
    for logical in dependency_order(new_map):
        new_json = new_map[logical]
        if logical not in old_map or logical not in tx.parsed:
            resource = self[logical]  # created now
            if resource is not None:
                tx.created.append((resource, new_json))
                changed.add(logical)
            continue
        if new_json == old_map[logical] and not references(new_json) & changed:
            continue
        original = tx.parsed[logical]
        updated = parse_and_update_resource(logical, new_json, self, self._account_id, self._region_name)
        if updated is None:  # a type moto cannot update: it stays as it was
            continue
        self._parsed_resources[logical] = updated
        if physical_id(updated) != physical_id(original):
            tx.created.append((updated, new_json))
            tx.obsolete.append((original, old_map[logical]))
            changed.add(logical)
        else:
            tx.in_place.append(logical)
            if updated is not original:
                changed.add(logical)
    for logical in [name for name in old_map if name not in new_map]:
        resource = self._parsed_resources.pop(logical, None)
        if resource is not None and not isinstance(resource, str):
            tx.obsolete.append((resource, old_map[logical]))


def commit(resource_map: ResourceMap) -> None:
    """The update succeeded: delete what it replaced or removed (CloudFormation's cleanup phase)."""
    tx: Transaction | None = getattr(resource_map, "box_transaction", None)
    if tx is None:
        return
    resource_map.box_transaction = None  # type: ignore[attr-defined]
    current = {physical_id(r) for r in resource_map._parsed_resources.values() if not isinstance(r, str)}
    for resource, resource_json in reversed(tx.obsolete):
        if physical_id(resource) in current:
            continue  # still the same resource under another logical ID
        try:
            resource_map._delete_resource(resource, resource_json)
        except Exception as exc:  # what could not be cleaned up stays, as CloudFormation leaves it
            log.warning("cleanup of %s failed: %s", physical_id(resource), exc)


def roll_back(resource_map: ResourceMap) -> bool:
    """The update failed: delete what it created, put the previous resources back; False if some could not be."""
    tx: Transaction | None = getattr(resource_map, "box_transaction", None)
    if tx is None:
        return False
    resource_map.box_transaction = None  # type: ignore[attr-defined]
    complete = True
    kept = {physical_id(r) for r in tx.parsed.values() if not isinstance(r, str)}
    for resource, resource_json in reversed(tx.created):
        if physical_id(resource) in kept:
            continue
        try:
            resource_map._delete_resource(resource, resource_json)
        except Exception as exc:
            complete = False
            log.warning("rollback could not delete %s: %s", physical_id(resource), exc)
    resource_map._template = tx.template
    resource_map._resource_json_map = tx.json_map
    resource_map._parsed_resources = dict(tx.parsed)
    for logical in tx.in_place:
        try:
            restored = parse_and_update_resource(
                logical, tx.json_map[logical], resource_map, resource_map._account_id, resource_map._region_name
            )
        except Exception as exc:
            complete = False
            log.warning("rollback could not restore %s: %s", logical, exc)
        else:
            if restored is not None:
                resource_map._parsed_resources[logical] = restored
    return complete


def replace_without_deleting(model_class: Any) -> None:
    """A resource class whose update creates the replacement only (the original goes at cleanup)."""

    def update_from_cloudformation_json(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    model_class.update_from_cloudformation_json = classmethod(update_from_cloudformation_json)


def apply() -> None:
    from moto.sagemaker.models import FakeEndpointConfig, Model

    ResourceMap.update = update  # type: ignore[method-assign]
    replace_without_deleting(Model)
    replace_without_deleting(FakeEndpointConfig)
