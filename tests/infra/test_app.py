"""The app's switches: CloudFormation validation on demand, feature flags, bootstrapless local synthesis."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sagemaker as sagemaker

from infra.app import FEATURE_FLAGS, apply_feature_flags, new_app
from infra.settings import AppSettings


def bad_endpoint_config(app: cdk.App) -> None:
    """A template CloudFormation would reject: the health-check timeout is capped at 3600 s."""
    variant = sagemaker.CfnEndpointConfig.ProductionVariantProperty(
        variant_name="AllTraffic",
        model_name="m",
        instance_type="ml.c5.2xlarge",
        initial_instance_count=1,
        container_startup_health_check_timeout_in_seconds=99_999,
    )
    sagemaker.CfnEndpointConfig(cdk.Stack(app, "Bad"), "Config", production_variants=[variant])


def test_cfn_validate_makes_schema_violations_fail_the_synth(tmp_path: Path) -> None:
    app = new_app(AppSettings(cfn_validate=True), tmp_path)
    apply_feature_flags(app)
    bad_endpoint_config(app)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    [plugin] = report["pluginReports"]
    assert plugin["pluginName"] == "CloudFormation Validate"
    assert any("greater than the maximum of 3600" in v["description"] for v in plugin["violations"])


def test_without_cfn_validate_the_same_template_synthesizes(tmp_path: Path) -> None:
    app = new_app(AppSettings(), tmp_path)
    apply_feature_flags(app)
    bad_endpoint_config(app)
    assert app.synth().get_stack_by_name("Bad").template["Resources"]


def test_feature_flags_do_not_override_explicit_context(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path), context={"@aws-cdk/aws-iam:minimizePolicies": False})
    apply_feature_flags(app)
    assert app.node.try_get_context("@aws-cdk/aws-iam:minimizePolicies") is False
    assert app.node.try_get_context("@aws-cdk/core:defaultCrossStackReferences") == "strong"
    assert FEATURE_FLAGS["@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy"] is True
