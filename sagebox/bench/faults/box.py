"""The embedded box the kill and restart scenarios drive: its URLs, boto3 clients with retries off, an endpoint
deployed into it, InvokeEndpoint as a Reply, and what its fleet.json says about an endpoint's instances.

The box's packages and boto3 are imported where they are used, so the pure parts of the benchmark (and their tests)
import neither.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.faults.outcomes import ANSWER, OTHER, Reply, classify_invoke, is_answer
from sagebox.bench.faults.waits import HANG_GUARD_S

# A manifest's variant -> the infra/targets.json target `sagebox up` deploys it as (restart scenario).
TARGET_OF_VARIANT = {"fp32": "c6i-fp32", "int8": "c6i-int8", "neuron": "inf2-neuron"}
ROLE = "arn:aws:iam::123456789012:role/SageboxExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:faults"
BUCKET = "sagebox-faults"


@dataclass(frozen=True)
class BoxUrls:
    """A running embedded AWS (process mode) and its runtime gateway."""

    aws_url: str
    gateway_url: str
    state_dir: Path
    region: str = "us-east-1"


def box_client(box: BoxUrls, service: str, **config: Any) -> Any:
    """A boto3 client of the box. sagebox.aws.client fixes botocore's retries at 3 (standard mode); here retries are
    off, so the benchmark sees every error a client would see before retrying."""
    import botocore.config

    from sagebox import aws

    options = aws.AwsOptions.for_box(box.region, box.aws_url, box.gateway_url)
    endpoint = box.gateway_url if service == "sagemaker-runtime" else box.aws_url
    return aws.session(options).client(
        service,
        endpoint_url=endpoint,
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}, **config),
    )


@contextlib.contextmanager
def embedded_box(state_dir: Path) -> Iterator[BoxUrls]:
    """An embedded AWS and gateway as `sagebox up` starts them (no stacks), stopped on exit."""
    from sagebox.box import processes
    from sagebox.box.state import BoxState
    from sagebox.box.up import start_embedded_aws, start_gateway

    state = BoxState()
    try:
        start_embedded_aws(state, state_dir)
        start_gateway(state, state_dir)
        yield BoxUrls(state.aws_url, state.gateway_url, state_dir, state.region)
    finally:
        for pid in (state.gateway_pid, state.aws_pid):
            if pid:
                processes.stop(pid, timeout=40)


def package_for_box(model_dir: Path, out: Path) -> tuple[Path, str]:
    """(folder holding <variant>/model.tar.gz, the target that deploys it) for `model_dir`."""
    from container.manifest import load_verified
    from sagebox.pipeline.package.tarball import package_model_dir

    variant = load_verified(model_dir).variant
    target = TARGET_OF_VARIANT.get(variant)
    if target is None:
        from sagebox.errors import SageboxError

        raise SageboxError(f"no box target for a {variant!r} model (known: {', '.join(TARGET_OF_VARIANT)})")
    package_model_dir(model_dir, out / variant / "model.tar.gz")
    return out, target


def deploy_endpoint(box: BoxUrls, name: str, tarball: Path, timeout_s: float = HANG_GUARD_S) -> None:
    """Model data into the box's S3, then CreateModel/EndpointConfig/Endpoint; returns once InService."""
    from botocore.exceptions import ClientError

    s3, sagemaker = box_client(box, "s3"), box_client(box, "sagemaker")
    with contextlib.suppress(ClientError):
        s3.create_bucket(Bucket=BUCKET)
    key = f"{name}/model.tar.gz"
    s3.upload_file(str(tarball), BUCKET, key)
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://{BUCKET}/{key}"},
    )
    variant = {
        "VariantName": "AllTraffic",
        "ModelName": name,
        "InstanceType": "ml.c6i.xlarge",
        "InitialInstanceCount": 1,
    }
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[variant])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    waiter = {"Delay": 1, "MaxAttempts": int(timeout_s)}
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=waiter)


def delete_endpoint(box: BoxUrls, name: str) -> None:
    """DeleteEndpoint, returning once it is gone (its serving process stopped)."""
    sagemaker = box_client(box, "sagemaker")
    sagemaker.delete_endpoint(EndpointName=name)
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})


class Invoker:
    """InvokeEndpoint through the box's gateway with boto3 (retries off); never raises."""

    def __init__(self, box: BoxUrls, endpoint: str, body: bytes, pool: int = 32) -> None:
        self.client = box_client(box, "sagemaker-runtime", max_pool_connections=pool)
        self.endpoint = endpoint
        self.body = body

    def __call__(self) -> Reply:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.invoke_endpoint(
                EndpointName=self.endpoint, Body=self.body, ContentType="application/json"
            )
            data = response["Body"].read()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            original = exc.response.get("OriginalStatusCode")
            return classify_invoke(
                status, str(error.get("Code", "")), int(original) if original else None, str(error.get("Message", ""))
            )
        except BotoCoreError as exc:
            return classify_invoke(0, type(exc).__name__, None, str(exc))
        if not is_answer(data):
            return Reply(OTHER, 200, "NotAnAnswer", data[:200].decode(errors="replace"))
        return Reply(ANSWER, 200)


def serving_pids(state_dir: Path, endpoint: str) -> list[int]:
    """The pids of the endpoint's serving processes, as the box's fleet.json records them."""
    from sagebox.box.reconciler import load_fleet

    variants = load_fleet(state_dir).get(endpoint, {}).get("variants", [])
    return [int(i["pid"]) for v in variants for i in v.get("instances", []) if i.get("pid")]


def restarts(state_dir: Path, endpoint: str) -> int:
    """How many instances of the endpoint the control plane has replaced (fleet.json, every variant)."""
    from sagebox.box.reconciler import load_fleet

    return sum(int(v.get("restarts", 0)) for v in load_fleet(state_dir).get(endpoint, {}).get("variants", []))
