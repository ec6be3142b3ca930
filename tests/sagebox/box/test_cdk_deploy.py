"""The README's "Rehearse it in the box, unchanged" commands, verbatim and in its order, as a newcomer runs them
after `make demo`: `sagebox up --containers --targets none`, `eval "$(sagebox env)"`, `npx cdk bootstrap` (which needs
no model: it runs before any is there), `npx cdk deploy sagebox-c6i-int8 --require-approval never` with build/models
empty and the demo's packages where `make demo` links them (build/demo-models), then `scripts/invoke-INT8.py
--endpoint sagebox-c6i-int8`. The real CDK CLI and cdk-assets build the image asset and push it into the embedded ECR
(a real registry), and the endpoint answers from a container of the very image that was pushed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from sagebox.paths import REPO
from tests.run_once import one_at_a_time
from tests.sagebox.conftest import Built

pytestmark = [pytest.mark.slow, pytest.mark.image, pytest.mark.timeout(1800)]
STACK = "sagebox-c6i-int8"


def checkout_copy(dest: Path) -> Path:
    """The repository's files as a fresh clone has them (plus untracked, unignored ones), with its .venv,
    node_modules and the offline wheelhouse linked in (a clone would install them)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    for name in (".venv", "node_modules"):
        (dest / name).symlink_to(REPO / name)
    for wheels in (REPO / "build").glob("wheelhouse-*"):
        shutil.copytree(wheels, dest / "build" / wheels.name, copy_function=os.link)
    return dest


def exports(text: str) -> dict[str, str]:
    return dict(line.removeprefix("export ").split("=", 1) for line in text.splitlines() if line.startswith("export "))


@pytest.fixture
def box(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    state_dir = tmp_path / "state"
    env = {**os.environ, "SAGEBOX_STATE_DIR": str(state_dir)}

    def sagebox(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sagebox", *args], cwd=REPO, env=env, capture_output=True, text=True
        )

    up = sagebox("up", "--containers", "--targets", "none")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        printed = sagebox("env")
        assert printed.returncode == 0, printed.stderr
        yield state_dir, exports(printed.stdout)
    finally:
        sagebox("down")


def test_cdk_bootstrap_and_deploy_unchanged_serve_the_pushed_image(
    built: Built, box: tuple[Path, dict[str, str]], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    import docker

    state_dir, box_env = box
    assert built.result.returncode == 0, built.result.stderr
    checkout = checkout_copy(tmp_path / "checkout")
    unset = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN")
    env = {**{k: v for k, v in os.environ.items() if k not in unset}, **box_env}

    def npx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["npx", "cdk", *args], cwd=checkout, env=env, capture_output=True, text=True)

    assert not (checkout / "build" / "models").exists()
    bootstrap = npx("bootstrap")  # no model anywhere yet: bootstrap needs none
    assert bootstrap.returncode == 0, bootstrap.stdout + bootstrap.stderr
    # What `make demo` leaves: build/models empty, the demo's packages linked from the cache.
    (checkout / "build" / "demo-models").symlink_to(built.out, target_is_directory=True)
    with one_at_a_time(tmp_path_factory, "serving-image-build"):  # one image build at a time in the run: layers reused
        deploy = npx("deploy", STACK, "--require-approval", "never")  # non-interactive: no approval prompt
    said = deploy.stdout + deploy.stderr
    assert deploy.returncode == 0, said
    assert f"{STACK}.EndpointName = {STACK}" in said
    assert "holds no packaged model: using the demo's" in said  # and says so

    invoke = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "scripts/invoke-INT8.py", "--endpoint", STACK],
        cwd=checkout,
        env={**env, "SAGEBOX_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
    )
    assert invoke.returncode == 0, invoke.stdout + invoke.stderr
    assert "questions, median latency" in invoke.stdout  # every question answered, by the container cdk deploy built

    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
    aws = box_env["AWS_ENDPOINT_URL"]
    ecr = session.client("ecr", endpoint_url=aws)
    repository = "cdk-hnb659fds-container-assets-123456789012-us-east-1"
    [pushed] = ecr.describe_images(repositoryName=repository)["imageDetails"]
    described = session.client("sagemaker", endpoint_url=aws).describe_endpoint(EndpointName=STACK)
    assert described["EndpointStatus"] == "InService"
    [image] = described["ProductionVariants"][0]["DeployedImages"]
    assert image["ResolvedImage"].endswith(f"/{repository}@{pushed['imageDigest']}")  # pulled by digest
    assert image["SpecifiedImage"].endswith(f".amazonaws.com/{repository}:{pushed['imageTags'][0]}")

    engine = docker.DockerClient(base_url=box_env["DOCKER_HOST"], version="auto")
    try:
        [serving] = engine.containers.list(filters={"label": f"org.sagebox.endpoint={STACK}"})
        assert serving.image.id == engine.images.get(image["ResolvedImage"]).id
    finally:
        engine.close()

    runtime = session.client("sagemaker-runtime", endpoint_url=box_env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"])
    context = "The Amazon rainforest covers most of the Amazon basin of South America."
    response = runtime.invoke_endpoint(
        EndpointName=STACK,
        Body=json.dumps({"question": "Which basin?", "context": context}),
        ContentType="application/json",
    )
    answer = json.loads(response["Body"].read())
    assert context[answer["start"] : answer["end"]] == answer["answer"]
    assert (state_dir / "registry" / "storage").is_dir()

    # `cdk destroy`, unchanged: the stack goes, and with it the endpoint and its container.
    destroy = npx("destroy", STACK, "--force")
    assert destroy.returncode == 0, destroy.stdout + destroy.stderr
    sagemaker = session.client("sagemaker", endpoint_url=aws)
    assert [e for e in sagemaker.list_endpoints()["Endpoints"] if e["EndpointName"] == STACK] == []
    engine = docker.DockerClient(base_url=box_env["DOCKER_HOST"], version="auto")
    try:
        for _ in range(300):  # the control plane stops the instance after the endpoint is deleted
            if not engine.containers.list(filters={"label": f"org.sagebox.endpoint={STACK}"}):
                break
            time.sleep(0.1)
        assert engine.containers.list(filters={"label": f"org.sagebox.endpoint={STACK}"}) == []
    finally:
        engine.close()
