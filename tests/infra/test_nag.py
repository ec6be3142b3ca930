"""cdk-nag AwsSolutions runs at every synth: the app is clean; each acknowledgement answers a real finding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from infra import nag
from infra.app import build
from infra.settings import AppSettings
from tests.infra.conftest import Synthesized


def test_the_app_synthesizes_with_no_unacknowledged_finding(synthesized: Synthesized) -> None:
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    assert report["pluginReports"] == []  # a failing plugin would have stopped the synth


def test_each_acknowledgement_answers_a_finding(
    settings: AppSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With acknowledgements withheld the same app fails, and exactly on the findings we acknowledge."""
    acknowledged: set[tuple[str, str]] = set()

    def record(scope: Any, rule: str, reason: str) -> None:
        assert len(reason) > 40, f"{rule} needs a real reason, got {reason!r}"
        acknowledged.add((scope.node.path, rule))

    monkeypatch.setattr(nag, "acknowledge", record)
    app = build(settings, outdir=tmp_path)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    [plugin] = report["pluginReports"]
    assert plugin["pluginName"] == "AwsSolutions" and plugin["conclusion"] == "failure"
    found = {
        (construct["constructPath"].removesuffix("/Resource"), violation["ruleName"])
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    }
    assert found == acknowledged
    # Every endpoint stack needs its log-stream and metrics wildcards; only c6i-int8 captures data.
    assert {rule for path, rule in found if path == "sagebox-c6i-int8/ExecutionRole"} == {
        "AwsSolutions-IAM5[Resource::*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:"
        "/aws/sagemaker/Endpoints/sagebox-c6i-int8:*]",
        "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::sagebox-artifacts-<AWS::AccountId>-<AWS::Region>"
        "/data-capture/sagebox-c6i-int8/*]",
    }
    assert len([rule for path, rule in found if path == "sagebox-c5-fp32/ExecutionRole"]) == 2


def test_a_finding_fails_the_synth(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))
    nag.enable(app)
    stack = cdk.Stack(app, "Careless")
    s3.Bucket(stack, "Open", block_public_access=s3.BlockPublicAccess.BLOCK_ALL)  # no SSL, no access logs
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


def test_an_acknowledgement_needs_a_reason() -> None:
    app = cdk.App()
    with pytest.raises(ValueError, match="needs a reason"):
        nag.acknowledge(cdk.Stack(app, "S"), "AwsSolutions-S1", "  ")
