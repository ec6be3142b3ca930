"""Real AWS clients, installed from PyPI into throwaway virtual environments, drive the box with nothing but
`eval "$(sagebox env)"`, in a network namespace whose only interface is loopback: whatever they try to reach
outside this machine fails, so a flow that completes contacted nothing outside loopback.

- the SageMaker Python SDK v2 (`sagemaker<3`, what most notebooks still run): `sagemaker.Session()` with no
  `default_bucket` (its STS call goes to a hard-coded `sts.<region>.amazonaws.com`, answered through the box's AWS
  proxy), `Model.deploy`, `Predictor.predict`, `delete_model`, `delete_endpoint`;
- the AWS CLI (`awscli`, v1: PyPI has no v2), the flow of AWS's C6i INT8 post: `s3 cp`, `sagemaker create-model`,
  `create-endpoint-config`, `create-endpoint`, `wait endpoint-in-service`, `sagemaker-runtime invoke-endpoint`,
  then `logs filter-log-events` on the endpoint's group, and on a deliberately broken model's;
- the SDK v3's `sagemaker.core.resources` (Model, EndpointConfig, Endpoint: create, wait, invoke, delete).

The scripts under tests/sagebox/box/clients/ are the users' code: they know nothing of Sagebox.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagebox.paths import REPO
from tests.run_once import run_once
from tests.sagebox.box.test_embedded_aws import tarball

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

CLIENTS = Path(__file__).parent / "clients"
# The clients as users install them (pinned here so a run is repeatable).
SDK_V2 = ("sagemaker==2.257.7", "awscli==1.46.3")
SDK_V3 = ("sagemaker-core==2.27.0",)


def throwaway_venv(path: Path, packages: tuple[str, ...]) -> Path:
    """A new virtual environment holding `packages` from PyPI (uv, the project's pinned installer)."""
    uv = REPO / ".venv" / "bin" / "uv"
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(path)], check=True)
    result = subprocess.run(
        [str(uv), "pip", "install", "-q", "--python", str(path / "bin" / "python"), *packages],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return path


def loopback_only() -> str | None:
    """Why a network namespace cannot be made here (None when it can)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare and ip (util-linux, iproute2) are needed"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"unshare --net failed: {probe.stderr.strip()}"


@dataclass(frozen=True)
class Run:
    result: subprocess.CompletedProcess[str]
    work: Path

    def read(self, name: str) -> str:
        path = self.work / name
        assert path.is_file(), (
            f"{name} missing; the run said:\n{self.result.stdout[-4000:]}\n{self.result.stderr[-4000:]}"
        )
        return path.read_text()

    def json(self, name: str) -> object:
        return json.loads(self.read(name))


@pytest.fixture(scope="session")
def run(tiny_model_tarball: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """Every client's flow, one after the other, against one box brought up with `sagebox up --targets none`,
    all inside a network namespace with loopback alone; once in the whole run, however many workers ask."""
    why = loopback_only()
    if why:
        pytest.fail(f"the no-network proof needs a network namespace: {why}")
    return run_once(tmp_path_factory, "real-clients", lambda work: run_flows(tiny_model_tarball, work))


def run_flows(tiny_model_tarball: Path, work: Path) -> Run:
    v2 = throwaway_venv(work / "sdk-v2", SDK_V2)
    v3 = throwaway_venv(work / "sdk-v3", SDK_V3)
    shutil.copy(tiny_model_tarball, work / "model.tar.gz")
    (work / "broken.tar.gz").write_bytes(tarball({"manifest.json": b'{"schema_version": 1}'}))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "HTTP", "http", "NO_PROXY", "no_proxy"))},
        "SAGEBOX": str(REPO / ".venv" / "bin" / "sagebox"),
        "SAGEBOX_STATE_DIR": str(work / "state"),
        "WORK": str(work),
        "V2": str(v2),
        "V3": str(v3),
        "CLIENTS": str(CLIENTS),
        "SAGEMAKER_SUPPRESS_V2_WARNING": "1",
    }
    result = subprocess.run(
        ["unshare", "--net", "bash", str(CLIENTS / "flows.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    return Run(result, work)


def test_the_box_ran_in_a_namespace_with_no_way_out(run: Run) -> None:
    assert run.result.returncode == 0, run.result.stdout[-4000:] + run.result.stderr[-4000:]
    routes = run.read("routes.txt")
    assert "127.0.0.0/8" in routes or "127.0.0.1" in routes
    assert "default" not in routes  # no route off the machine
    assert run.read("outside.txt").strip() == "unreachable"  # and so nothing outside could have been reached


def test_sdk_v2_session_deploys_predicts_and_deletes_with_no_default_bucket(run: Run) -> None:
    said = run.json("sdk-v2.json")
    assert isinstance(said, dict)
    assert said["bucket"] == "sagemaker-us-east-1-123456789012"  # the account STS gave through the proxy
    answer = said["answer"]
    assert said["context"][answer["start"] : answer["end"]] == answer["answer"]
    assert said["endpoints_after"] == [] and said["models_after"] == []


def test_the_proxy_answered_only_aws_hostnames_and_passed_nothing_through(run: Run) -> None:
    asked = re.compile(r"\) (CONNECT \S+|[A-Z]+ http://\S+) -> ")  # one line per request the proxy served
    served = [line for line in run.read("aws-proxy.log").splitlines() if asked.search(line)]
    assert any("CONNECT sts.us-east-1.amazonaws.com:443 -> embedded AWS" in line for line in served), served
    for line in served:  # every request the proxy saw named an AWS hostname, and the box answered it
        assert " -> embedded AWS " in line or " -> runtime gateway " in line, line


def test_aws_cli_runs_the_c6i_posts_flow_and_reads_the_endpoints_logs(run: Run) -> None:
    answer = run.json("cli-answer.json")
    assert isinstance(answer, dict) and answer["answer"]
    events = run.json("cli-logs.json")
    assert isinstance(events, dict)
    messages = [e["message"] for e in events["events"]]
    assert any("model ready" in m for m in messages)
    assert {e["logStreamName"].split("/")[0] for e in events["events"]} == {"AllTraffic"}


def test_a_broken_models_reason_is_in_its_log_group_as_the_cli_reads_it(run: Run) -> None:
    described = run.json("cli-broken-describe.json")
    assert isinstance(described, dict) and described["EndpointStatus"] == "Failed"
    events = run.json("cli-broken-logs.json")
    assert isinstance(events, dict)
    messages = [e["message"] for e in events["events"]]
    assert any("model refused:" in m and "manifest.json is invalid" in m for m in messages), messages
    assert f"sagebox: {described['FailureReason']}" in messages


def test_sdk_v3_resources_create_wait_invoke_and_delete(run: Run) -> None:
    said = run.json("sdk-v3.json")
    assert isinstance(said, dict) and said["status"] == "InService"
    answer = said["answer"]
    assert said["context"][answer["start"] : answer["end"]] == answer["answer"]
    assert said["deleted"] is True
