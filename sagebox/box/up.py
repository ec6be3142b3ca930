"""`sagebox up`: SageMaker in a box.

Build (or reuse) the demo artifacts, start an embedded AWS (moto server), upload the artifacts to its S3,
deploy the synthesized endpoint stacks into its CloudFormation, then do what SageMaker does for each
endpoint: download the model data, untar it into a model directory and start the serving container (a
process, or the real image with --containers) with the model's environment. A local SageMaker runtime
gateway answers boto3's InvokeEndpoint for every endpoint.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.box import processes
from sagebox.box.routes import Route, save_routes
from sagebox.box.state import BoxState, EndpointState, load_state, save_state
from sagebox.errors import SageboxError
from sagebox.local_server import free_port

DEFAULT_TARGETS = ("c6i-int8", "c6i-fp32", "inf2-neuron")
REGION = "us-east-1"
ACCOUNT = "123456789012"
ASSET_BUCKET = f"sagebox-local-assets-{ACCOUNT}-{REGION}"  # plays `cdk bootstrap`'s asset bucket
ROUTES_FILE = "routes.json"

Say = Callable[[str], None]


@dataclass(frozen=True)
class UpOptions:
    targets: tuple[str, ...] = DEFAULT_TARGETS
    containers: bool = False
    state_dir: Path = Path(".sagebox")
    # variant -> model.tar.gz to deploy; None builds (or reuses) the demo's MiniLM artifacts.
    tarballs: dict[str, Path] | None = None


def box_clients(state: BoxState) -> tuple[Any, Any, Any]:
    """(cloudformation, sagemaker, s3) clients of the embedded AWS."""
    from sagebox import aws

    options = aws.AwsOptions.for_box(state.region, state.aws_url, state.gateway_url)
    session = aws.session(options)
    return (
        aws.client(session, "cloudformation", options),
        aws.client(session, "sagemaker", options),
        aws.client(session, "s3", options),
    )


def start_embedded_aws(state: BoxState, state_dir: Path) -> None:
    port = free_port()
    log = state_dir / "logs" / "embedded-aws.log"
    pid = processes.spawn(["-m", "sagebox.box.moto_server", "--port", str(port)], log)
    # "localhost", not 127.0.0.1: the CDK CLI reads a leading "127" as a bucket name (see shared notes).
    state.aws_url, state.aws_pid = f"http://localhost:{port}", pid
    processes.wait_http(f"http://127.0.0.1:{port}/moto-api/", pid, log, timeout=60)


def start_gateway(state: BoxState, state_dir: Path) -> None:
    from sagebox.box import runtime_gateway

    routes = state_dir / ROUTES_FILE
    save_routes(routes, {})
    log = state_dir / "logs" / "runtime-gateway.log"
    state.gateway_url, state.gateway_pid = runtime_gateway.spawn(routes, log, state.region)


def download_model(s3: Any, model_data_url: str, dest: Path) -> Path:
    """What SageMaker does with ModelDataUrl: fetch the tarball and untar it into the model directory."""
    from sagebox.pipeline.package import unpack_and_verify

    if not model_data_url.startswith("s3://"):
        raise SageboxError(f"model data {model_data_url!r} is not an s3:// URI")
    bucket, _, key = model_data_url[5:].partition("/")
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        tarball = Path(tmp) / "model.tar.gz"
        s3.download_file(bucket, key, str(tarball))
        staging = Path(tmp) / "model"
        unpack_and_verify(tarball, staging)
        shutil.rmtree(dest, ignore_errors=True)
        os.replace(staging, dest)
    return dest


def local_environment(model_env: dict[str, str]) -> dict[str, str]:
    """The model's environment, with workers and threads scaled to this machine instead of the instance."""
    from container import env
    from container.env import available_cpus

    scaled = dict(model_env)
    scaled[env.MODEL_SERVER_WORKERS] = "1"
    scaled[env.INTRA_OP_THREADS] = str(available_cpus())
    return scaled


def start_endpoint(endpoint: EndpointState, model_env: dict[str, str], state_dir: Path, containers: bool) -> None:
    port = free_port()
    log = state_dir / "logs" / f"endpoint-{endpoint.target}.log"
    environment = local_environment(model_env)
    if containers:
        from sagebox.box.containers import start_container

        endpoint.container_id = start_container(Path(endpoint.model_dir), port, environment)
    else:
        from container import env

        environment.update({env.MODEL_DIR: endpoint.model_dir, env.BIND_TO_PORT: str(port)})
        endpoint.pid = processes.spawn(["-m", "container", "serve"], log, environment)
    endpoint.url = f"http://127.0.0.1:{port}"
    endpoint.log_path = str(log)


def wait_endpoint(endpoint: EndpointState, timeout: float = 300) -> None:
    if endpoint.container_id:
        from sagebox.box.containers import wait_container

        wait_container(endpoint.container_id, endpoint.url, timeout)
        return
    processes.wait_http(f"{endpoint.url}/ping", endpoint.pid, Path(endpoint.log_path), timeout=timeout)


def bring_up(options: UpOptions, step: Callable[[str], Any]) -> BoxState:
    """Run every step; `step(title)` returns a context manager that reports progress for that step."""
    from sagebox.box.artifacts import demo_artifacts

    state_dir = options.state_dir
    if (existing := load_state(state_dir)) is not None and processes.alive(existing.aws_pid):
        raise SageboxError("a local box is already running: `sagebox down` first (or use it as it is)")
    targets = _check_targets(options.targets)
    if options.tarballs is None:
        with step("demo artifacts: MiniLM QA as FP32, INT8 and Neuron") as say:
            tarballs = demo_artifacts(say).tarballs
    else:
        tarballs = options.tarballs
    state = BoxState(region=REGION, mode="containers" if options.containers else "processes")
    image_uri = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sagebox-serving:latest"
    if options.containers:
        with step("serving image (podman or Docker Engine)") as say:
            from sagebox.box.containers import ensure_image

            ensure_image(say)
    try:
        with step("embedded AWS (moto server)"):
            start_embedded_aws(state, state_dir)
            save_state(state_dir, state)
        cloudformation, sagemaker, s3 = box_clients(state)
        with step(f"upload artifacts to s3://{ASSET_BUCKET}") as say:
            model_data = _upload(s3, tarballs, targets, say)
        with step(f"synthesize {len(targets)} endpoint stacks (CDK, cdk-nag)"):
            from infra.local import synth_templates
            from infra.targets import load_targets, select

            chosen = select(load_targets(), list(targets))
            templates = synth_templates(chosen, image_uri, model_data)
        with step("deploy the stacks into the embedded CloudFormation"):
            from infra.local import deploy

            state.stacks = list(templates)
            save_state(state_dir, state)
            names = deploy(cloudformation, templates, poll_s=0.2)
        with step("start the runtime gateway"):
            start_gateway(state, state_dir)
            save_state(state_dir, state)
        with step(f"start {len(names)} endpoint(s) from their model data, as SageMaker does") as say:
            _start_endpoints(state, state_dir, names, sagemaker, s3, options.containers, say)
    except BaseException:
        save_state(state_dir, state)
        raise
    save_state(state_dir, state)
    return state


def _check_targets(targets: Sequence[str]) -> tuple[str, ...]:
    from infra.targets import load_targets

    known = {t.name: t for t in load_targets()}
    unknown = [t for t in targets if t not in known]
    if unknown:
        raise SageboxError(f"unknown target(s) {', '.join(unknown)}; infra/targets.json has {', '.join(known)}")
    return tuple(targets)


def _upload(s3: Any, tarballs: dict[str, Path], targets: Sequence[str], say: Say) -> dict[str, str]:
    from infra.targets import load_targets
    from sagebox.pipeline.upload import upload_artifact

    s3.create_bucket(Bucket=ASSET_BUCKET)
    variants = {t.name: t.variant for t in load_targets()}
    uris: dict[str, str] = {}
    uploaded: dict[str, str] = {}
    for target in targets:
        variant = variants[target]
        if variant is None:
            raise SageboxError(f"target {target} names no variant: the box deploys the demo's fp32, int8 or neuron")
        if variant not in tarballs:
            raise SageboxError(f"target {target} needs a {variant} artifact, and none was given")
        if variant not in uploaded:
            result = upload_artifact(s3, tarballs[variant], ASSET_BUCKET, f"models/{variant}/model.tar.gz")
            say(f"{variant}: {result.bytes / 1e6:.1f} MB, sha256 {result.sha256[:12]}… verified by S3")
            uploaded[variant] = result.uri
        uris[target] = uploaded[variant]
    return uris


def endpoint_name_of(target: str) -> str:
    """The endpoint stack's name (the stacks name endpoints `<prefix>-<target>`; moto renames the endpoints)."""
    from infra.settings import AppSettings

    return f"{AppSettings().prefix}-{target}"


def _start_endpoints(
    state: BoxState, state_dir: Path, names: dict[str, str], sagemaker: Any, s3: Any, containers: bool, say: Say
) -> None:
    endpoints_dir = state_dir / "endpoints"
    endpoints_dir.mkdir(parents=True, exist_ok=True)
    started = []
    for target, endpoint_name in sorted(names.items()):
        described = sagemaker.describe_endpoint(EndpointName=endpoint_name)
        config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
        variant = config["ProductionVariants"][0]
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        container = model["PrimaryContainer"]
        model_dir = download_model(s3, container["ModelDataUrl"], endpoints_dir / target / "model")
        from container.manifest import load_verified

        endpoint = EndpointState(
            target=target,
            endpoint_name=endpoint_name,
            instance_type=variant["InstanceType"],
            variant=load_verified(model_dir).variant,
            stack_name=endpoint_name_of(target),
            model_dir=str(model_dir),
        )
        start_endpoint(endpoint, dict(container.get("Environment", {})), state_dir, containers)
        state.endpoints[target] = endpoint
        save_state(state_dir, state)
        started.append(endpoint)
        say(f"{target}: {endpoint_name} ({endpoint.instance_type}, {endpoint.variant}) starting at {endpoint.url}")
    routes = {}
    for endpoint in started:
        wait_endpoint(endpoint)
        routes[endpoint.endpoint_name] = Route(endpoint.endpoint_name, endpoint.url, "AllTraffic", endpoint.log_path)
        say(f"{endpoint.target}: /ping 200")
    save_routes(state_dir / ROUTES_FILE, routes)
