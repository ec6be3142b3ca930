"""The CDK app through the pinned npm `aws-cdk` CLI (synth). Deploys through it are tested against the box
(tests/sagebox/box/test_cdk_deploy.py, test_up_down.py)."""

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
from tests.infra.conftest import SESSION_CONTEXT, Synthesized

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
        *(arg for key, value in SESSION_CONTEXT.items() for arg in ("-c", f"{key}={value}")),
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
    neuron = json.loads((tmp_path / "sagebox-trn1-neuron.assets.json").read_text())
    [image] = neuron["dockerImages"].values()
    assert image["source"]["dockerFile"] == "container/Dockerfile.neuron"


def test_cdk_synth_reports_a_missing_model_in_one_line_and_list_needs_none(tmp_path: Path) -> None:
    """A target whose model is not packaged yet stops `cdk synth`/`cdk deploy` of its stack with one line; the app
    still synthesizes, so `cdk list` and `cdk bootstrap` (which needs no model) run."""
    result = run_cdk("synth", "--quiet", "-o", str(tmp_path / "out"), "-c", f"model_dir={tmp_path}")
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert f"target 'c5-fp32': model artifact {tmp_path}/fp32/model.tar.gz does not exist" in output
    assert "make demo" in output
    assert "Traceback" not in output and "program.js" not in output  # no Python or jsii stack trace
    listed = run_cdk("list", "-o", str(tmp_path / "listed"), "-c", f"model_dir={tmp_path}")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert {"sagebox-artifacts", "sagebox-c6i-int8", "sagebox-inf2-neuron"} <= set(listed.stdout.split())


def test_one_process_synthesizes_every_stack(
    model_dir: Path, build_context: Path, tmp_path: Path, record_property: Any
) -> None:
    """`python -m infra.app` as `cdk.json` runs it (imports, node start-up, cdk-nag, assets); its time is recorded,
    not asserted (README's figures come from `sagebox infra synth`)."""
    context = json.dumps({**SESSION_CONTEXT, "model_dir": str(model_dir), "build_context": str(build_context)})
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
