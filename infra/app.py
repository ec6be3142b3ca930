"""The CDK app: `cdk.json` runs `python -m infra.app`; tests and `sagebox infra synth` call `build()` in-process."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk

from infra import nag
from infra.errors import InfraError, MissingArtifact
from infra.plan import EndpointPlan, artifacts_stack_name, plan_endpoints, plan_endpoints_or_missing
from infra.settings import CONTEXT_KEYS, AppSettings, default_model_dir
from infra.stacks.artifacts import ArtifactsStack
from infra.stacks.endpoint import EndpointStack
from infra.targets import Target, load_target_files, select

# Feature flags the stacks rely on, set here (not only in cdk.json) so in-process synths behave the same.
FEATURE_FLAGS: dict[str, object] = {
    "@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True,
    "@aws-cdk/aws-s3:createDefaultLoggingPolicy": True,
    "@aws-cdk/aws-s3:publicAccessBlockedByDefault": True,
    "@aws-cdk/aws-iam:minimizePolicies": True,
    "@aws-cdk/core:enablePartitionLiterals": True,
    "@aws-cdk/aws-kms:aliasNameRef": True,
    "@aws-cdk/aws-kms:reduceCrossAccountRegionPolicyScope": True,
    "@aws-cdk/core:validateSnapshotRemovalPolicy": True,
    "@aws-cdk/core:explicitStackTags": True,
    # Classic Export/Fn::ImportValue references, which moto supports and which protect the artifacts stack.
    "@aws-cdk/core:defaultCrossStackReferences": "strong",
    # When CloudFormation validation runs (settings.cfn_validate), its findings fail the synth.
    "@aws-cdk/core:validateAgainstDefaultRules": True,
}


def apply_feature_flags(app: cdk.App) -> None:
    for key, value in FEATURE_FLAGS.items():
        if app.node.try_get_context(key) is None:
            app.node.set_context(key, value)


def add_stacks(
    app: cdk.App, settings: AppSettings, targets: Sequence[Target] | None = None, *, missing_ok: bool = False
) -> list[cdk.Stack]:
    """The artifacts stack and one endpoint stack per target, with cdk-nag's AwsSolutions checks on the app.

    `targets` default to the settings' targets file. With `missing_ok` (the CDK CLI's app), a target whose local
    model artifact is not there gets an empty stack of its name carrying the error: `cdk bootstrap` and `cdk list`
    need no model, while `cdk synth`/`cdk deploy` of that stack stop with the error.
    """
    chosen = load_target_files(settings.targets_files) if targets is None else targets
    plans: Sequence[EndpointPlan | MissingArtifact] = (
        plan_endpoints_or_missing(chosen, settings) if missing_ok else plan_endpoints(chosen, settings)
    )
    apply_feature_flags(app)
    nag.enable(app)
    artifacts = ArtifactsStack(app, artifacts_stack_name(settings.prefix), prefix=settings.prefix)
    stacks: list[cdk.Stack] = [artifacts]
    for target, plan in zip(select(chosen, settings.only), plans, strict=True):
        stack: cdk.Stack
        if isinstance(plan, MissingArtifact):
            stack = cdk.Stack(app, f"{settings.prefix}-{target.name}")
            cdk.Annotations.of(stack).add_error(str(plan))
        else:
            stack = EndpointStack(app, plan.stack_name, plan=plan, artifacts=artifacts)
        cdk.Tags.of(stack).add("sagebox:target", target.name)
        stacks.append(stack)
    for stack in stacks:
        cdk.Tags.of(stack).add("sagebox:app", settings.prefix)
    return stacks


def new_app(settings: AppSettings, outdir: Path | None = None) -> cdk.App:
    """CDK's built-in CloudFormation validation costs ~3/4 of a synth (7 of 9 CPU-seconds here): opt-in.

    The tests and the CLI synth test turn it on, so every template of the app is validated in CI.
    """
    # No construct stack traces: an error annotation reads as its one line, not a jsii program.js location.
    return cdk.App(
        outdir=str(outdir) if outdir else None,
        builtin_cloud_formation_validation=settings.cfn_validate,
        stack_traces=False,
    )


def build(settings: AppSettings, targets: Sequence[Target] | None = None, *, outdir: Path | None = None) -> cdk.App:
    """A ready-to-synth app (in-process: tests, `sagebox infra synth`)."""
    app = new_app(settings, outdir)
    add_stacks(app, settings, targets)
    return app


def main() -> int:
    """`cdk.json`'s app: settings from the CDK context; a user error is one line on stderr and exit 1."""
    try:
        # App props must be known at construction: a first App only reads the context the CLI passed.
        reader = cdk.App(auto_synth=False)
        context = {key: reader.node.try_get_context(key) for key in CONTEXT_KEYS}
        settings = AppSettings.from_context({k: v for k, v in context.items() if v is not None}, Path.cwd())
        if context.get("model_dir") in (None, ""):  # build/models, else the demo's packages (said so)
            model_dir, notes = default_model_dir()
            settings = dataclasses.replace(settings, model_dir=model_dir)
            for note in notes:
                print(f"sagebox infra: {note}", file=sys.stderr)
        app = new_app(settings)
        add_stacks(app, settings, missing_ok=True)
    except InfraError as exc:
        print(f"sagebox infra: error: {exc}", file=sys.stderr)
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
