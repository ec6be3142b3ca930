"""moto's KMS: keys created from templates accept CloudFormation's tags (listed in infra/README.md).

AWS::KMS::Key's `Tags` are `{Key, Value}` pairs; moto 5.2 passed them to its KMS backend, which expects the KMS
API's `{TagKey, TagValue}`, and failed with KeyError 'TagKey' (so `cdk deploy` of a tagged key failed).
"""

from __future__ import annotations

import threading
from typing import Any

from moto.kms.models import Key

_lock = threading.Lock()
_applied = False


def cfn_tags_to_kms(tags: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`{Key, Value}` (CloudFormation) as `{TagKey, TagValue}` (KMS API); tags already in KMS form pass through."""
    return [
        {"TagKey": t["Key"], "TagValue": t.get("Value", "")} if "Key" in t and "TagKey" not in t else t for t in tags
    ]


def apply() -> None:
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    original = Key.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create_from_cloudformation_json(
        cls: type[Key], resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Key:
        properties = dict(cloudformation_json.get("Properties", {}))
        if properties.get("Tags"):
            properties["Tags"] = cfn_tags_to_kms(properties["Tags"])
        fixed = {**cloudformation_json, "Properties": properties}
        key: Key = original(cls, resource_name, fixed, account_id, region_name, **kwargs)
        return key

    Key.create_from_cloudformation_json = classmethod(create_from_cloudformation_json)  # type: ignore[method-assign,assignment]
