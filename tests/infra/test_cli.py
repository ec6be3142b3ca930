"""The CDK app through the pinned npm `aws-cdk` CLI: synth, and deploy/diff/destroy into a moto server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from infra.settings import REPO_ROOT
from tests.infra.conftest import IMAGE_URI, Synthesized, client

CDK = REPO_ROOT / "node_modules" / ".bin" / "cdk"
pytestmark = [
    pytest.mark.slow,
    # moto skips these resource types (alarms, autoscaling, bucket policies): the template tests cover them.
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]


def run_cdk(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    if not CDK.exists():
        pytest.fail(f"the pinned CDK CLI is missing at {CDK}: run `make node` (npm ci)")
    environment = {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "NODE_NO_WARNINGS": "1",
        "AWS_EC2_METADATA_DISABLED": "true",
        **(env or {}),
    }
    return subprocess.run(
        [str(CDK), *args], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=timeout
    )


def without_metadata(template: dict[str, Any]) -> dict[str, Any]:
    """The CLI adds `aws:cdk:path` metadata to each resource; the rest must equal the in-process synth."""
    copy = json.loads(json.dumps(template))
    for resource in copy["Resources"].values():
        resource.pop("Metadata", None)
    copy.pop("Metadata", None)
    return copy


def test_cdk_synth_through_the_cli(
    synthesized: Synthesized, model_dir: Path, build_context: Path, tmp_path: Path
) -> None:
    result = run_cdk(
        "synth",
        "--quiet",
        "-o",
        str(tmp_path),
        "-c",
        f"model_dir={model_dir}",
        "-c",
        f"build_context={build_context}",
    )
    assert result.returncode == 0, result.stderr
    assert "Successfully synthesized" in result.stdout + result.stderr
    for stack, template in synthesized.templates.items():
        assert without_metadata(json.loads((tmp_path / f"{stack}.template.json").read_text())) == template
    assets = json.loads((tmp_path / "sagebox-c5-fp32.assets.json").read_text())
    [image] = assets["dockerImages"].values()
    assert image["source"]["platform"] == "linux/amd64" and image["source"]["dockerFile"] == "container/Dockerfile"
    [model_data] = [f for f in assets["files"].values() if f["displayName"] == "ModelData"]
    assert model_data["source"]["path"].endswith(".tar.gz")


def test_cdk_synth_reports_a_bad_target_in_one_line(tmp_path: Path) -> None:
    result = run_cdk("synth", "--quiet", "-o", str(tmp_path / "out"), "-c", f"model_dir={tmp_path}")
    assert result.returncode != 0
    assert f"sagebox infra: error: target 'c5-fp32': model artifact {tmp_path}/fp32/model.tar.gz does not exist" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_cdk_deploy_diff_destroy_into_moto(moto_url: str, tmp_path: Path) -> None:
    """A local target (image URI, S3 model data), deployed by the CLI without bootstrap into moto."""
    targets = tmp_path / "targets.json"
    targets.write_text(
        json.dumps(
            {
                "targets": [
                    {
                        "name": "int8",
                        "instance_type": "ml.c6i.2xlarge",
                        "variant": "int8",
                        "model_data": "s3://cli-models/int8/model.tar.gz",
                        "image": IMAGE_URI,
                        "data_capture": {"sampling_percent": 5},
                    }
                ]
            }
        )
    )
    context = [
        "-c",
        "local=true",
        "-c",
        f"targets={targets}",
        "-c",
        "prefix=cli",
        "-o",
        str(tmp_path / "out"),
    ]
    env = {
        "AWS_ENDPOINT_URL": moto_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    # moto's change sets register no stack outputs or exports: deploy with direct CreateStack/UpdateStack.
    deployed = run_cdk("deploy", "--all", "--method=direct", "--require-approval", "never", *context, env=env)
    assert deployed.returncode == 0, deployed.stderr
    cloudformation = client("cloudformation", moto_url)
    [stack] = cloudformation.describe_stacks(StackName="cli-int8")["Stacks"]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
    assert f"cli-int8.EndpointName = {outputs['EndpointName']}" in deployed.stdout + deployed.stderr
    sagemaker = client("sagemaker", moto_url)
    endpoint = sagemaker.describe_endpoint(EndpointName=outputs["EndpointName"])
    assert endpoint["EndpointStatus"] == "InService"
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    assert config["ProductionVariants"][0]["InstanceType"] == "ml.c6i.2xlarge"
    assert config["DataCaptureConfig"]["DestinationS3Uri"] == (
        "s3://cli-artifacts-123456789012-us-east-1/data-capture/cli-int8"
    )

    diff = run_cdk("diff", "--method=template", *context, env=env)
    assert diff.returncode == 0, diff.stderr
    assert "Number of stacks with differences: 0" in diff.stdout + diff.stderr

    destroyed = run_cdk("destroy", "--all", "--force", *context, env=env)
    assert destroyed.returncode == 0, destroyed.stderr
    remaining = {s["StackName"] for s in cloudformation.describe_stacks()["Stacks"]}
    assert not remaining & {"cli-artifacts", "cli-int8"}


def test_one_process_synthesizes_every_stack_within_20_seconds(
    model_dir: Path, build_context: Path, tmp_path: Path, record_property: Any
) -> None:
    """The issue's budget, measured as `python -m infra.app` (imports, node start-up, cdk-nag, assets)."""
    context = json.dumps({"model_dir": str(model_dir), "build_context": str(build_context)})
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path), "CDK_CONTEXT_JSON": context}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "infra.app"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.perf_counter() - started
    record_property("synth_seconds", round(seconds, 2))
    assert result.returncode == 0, result.stderr
    assert len(list(tmp_path.glob("*.template.json"))) == 6
    assert seconds <= 20, f"synth of all stacks took {seconds:.1f} s"
