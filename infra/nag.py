"""cdk-nag 3.x: the AwsSolutions pack runs at every synth; each acknowledgement carries its reason in code."""

from __future__ import annotations

import aws_cdk as cdk
import cdk_nag
from constructs import IConstruct

PACK = "AwsSolutions"


def enable(app: cdk.App) -> None:
    """Findings that are not acknowledged make `app.synth()` fail."""
    cdk.Validations.of(app).add_plugins(cdk_nag.AwsSolutionsChecks(app))


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    """Accept one finding (e.g. `AwsSolutions-IAM5[Resource::*]`) on `scope` and everything under it."""
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} needs a reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule, reason=reason))
