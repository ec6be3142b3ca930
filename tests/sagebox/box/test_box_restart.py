"""Nothing lost when the box itself fails (issue 29, item 5): a box brought up with `sagebox up --targets none`
(bring_up, at time scale 0.01), killed outright (kill -9) and brought up again with `sagebox up`.

- 50 asynchronous requests accepted (202), then every box process killed (the embedded AWS with its control plane,
  the gateway, the AWS proxy, the endpoint's instances): after `sagebox up`, 50 outputs or failure objects in S3
  and 50 notifications, none twice (5 of the requests name an input that does not exist: failure objects).
- The control plane (the embedded AWS process) killed during an UpdateEndpoint while the new fleet starts, while it
  bakes, and while the old fleet waits to retire: after `sagebox up` the endpoint serves, and DescribeEndpoint names
  the config it serves (each config has its own variant name, which the answer's InvokedProductionVariant shows).

No wall-clock asserts: every wait polls observable state (the fleet file, DescribeEndpoint, S3, SQS, the gateway's
journal) with a deadline that only guards against a hang.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from sagebox.box import processes
from sagebox.box.async_journal import AsyncJournal
from sagebox.box.down import _instances, tear_down
from sagebox.box.reconciler import load_fleet
from sagebox.box.state import BoxState, load_state
from sagebox.box.up import UpOptions, bring_up
from tests.conftest import minilm_tokenizer_path
from tests.sagebox.box.test_endpoint_types_e2e import poll as poll_until
from tests.sagebox.box.test_guardrails_e2e import IMAGE, QUESTION, ROLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SCALE = 0.01
DEADLINE_S = 240.0  # guards against a hang only
BUCKET = "restart"
REQUESTS = 50
MISSING = 5  # requests whose input is not in S3: each ends with a failure object


def quiet(title: str) -> Any:
    return contextlib.nullcontext(lambda line: None)


def poll(what: str, found: Callable[[], Any]) -> Any:
    return poll_until(what, found, DEADLINE_S)


@dataclass
class Box:
    state_dir: Path

    @property
    def state(self) -> BoxState:
        found = load_state(self.state_dir)
        assert found is not None
        return found

    def client(self, service: str) -> Any:
        state = self.state
        url = state.gateway_url if service == "sagemaker-runtime" else state.aws_url
        return boto3.client(
            service,
            endpoint_url=url,
            region_name=state.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def up(self) -> None:
        bring_up(UpOptions(targets=(), state_dir=self.state_dir, time_scale=SCALE), quiet)

    def kill(self, everything: bool) -> None:
        """kill -9 of the embedded AWS (and its control plane); with `everything`, of every box process."""
        state = self.state
        pids = [state.aws_pid]
        if everything:
            pids += [state.gateway_pid, state.aws_proxy_pid]
            pids += [int(i.get("pid") or 0) for _, i in _instances(load_fleet(self.state_dir))]
        for pid in pids:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        poll("the killed processes gone", lambda: not any(processes.alive(p) for p in pids if p))


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    from sagebox.pipeline.package.tarball import package_model_dir
    from tests.sagebox.box.guardrail_models import build_model_dir

    work = tmp_path_factory.mktemp("restart-box")
    model_dir = build_model_dir(work / "good", minilm_tokenizer_path(), "good")
    tarball = package_model_dir(model_dir, work / "good.tar.gz").path
    box = Box(work / "state")
    box.up()
    try:
        s3 = box.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        s3.upload_file(str(tarball), BUCKET, "good.tar.gz")
        yield box
    finally:
        tear_down(box.state_dir, lambda line: None)


def create_config(box: Box, name: str, variant: str, **extra: Any) -> str:
    sagemaker = box.client("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://{BUCKET}/good.tar.gz"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        ProductionVariants=[
            {"VariantName": variant, "ModelName": name, "InstanceType": "ml.c6i.xlarge", "InitialInstanceCount": 1}
        ],
        **extra,
    )
    return name


def in_service(box: Box, endpoint: str) -> dict[str, Any]:
    def described() -> dict[str, Any] | None:
        found = box.client("sagemaker").describe_endpoint(EndpointName=endpoint)
        return found if found["EndpointStatus"] == "InService" else None

    return dict(poll(f"{endpoint} InService", described))


def subscribed_queue(box: Box, name: str) -> tuple[str, str]:
    """(topic ARN, queue URL): an SNS topic with an SQS queue subscribed (raw delivery)."""
    sns, sqs = box.client("sns"), box.client("sqs")
    topic = sns.create_topic(Name=name)["TopicArn"]
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
    return topic, url


def drain(box: Box, queue: str) -> list[dict[str, Any]]:
    """Every message the queue holds now (received and deleted), as parsed JSON."""
    sqs = box.client("sqs")
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    found: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def test_async_requests_accepted_before_every_box_process_is_killed_all_end_once(box: Box) -> None:
    endpoint = "restart-async"
    success, _ = subscribed_queue(box, "restart-success")
    error, _ = subscribed_queue(box, "restart-error")
    config = create_config(
        box,
        endpoint,
        "AllTraffic",
        AsyncInferenceConfig={
            "OutputConfig": {
                "S3OutputPath": f"s3://{BUCKET}/outputs",
                "S3FailurePath": f"s3://{BUCKET}/failures",
                "NotificationConfig": {"SuccessTopic": success, "ErrorTopic": error},
            },
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1},
        },
    )
    box.client("sagemaker").create_endpoint(EndpointName=endpoint, EndpointConfigName=config)
    in_service(box, endpoint)
    s3, runtime = box.client("s3"), box.client("sagemaker-runtime")
    ids = [f"r{i:02d}" for i in range(REQUESTS)]
    for inference_id in ids[MISSING:]:
        s3.put_object(Bucket=BUCKET, Key=f"inputs/{inference_id}.json", Body=QUESTION.encode())
    for inference_id in ids:
        queued = runtime.invoke_endpoint_async(
            EndpointName=endpoint,
            InputLocation=f"s3://{BUCKET}/inputs/{inference_id}.json",
            ContentType="application/json",
            InferenceId=inference_id,
        )
        assert queued["ResponseMetadata"]["HTTPStatusCode"] == 202

    box.kill(everything=True)
    unfinished = len(AsyncJournal(box.state_dir).unfinished())
    print(f"{unfinished} of {REQUESTS} accepted requests unfinished when the box was killed")
    box.up()

    def objects() -> set[str] | None:
        listed = box.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])
        names = {o["Key"] for o in listed if o["Key"].startswith(("outputs/", "failures/"))}
        return names if len(names) >= REQUESTS else None

    names = poll("50 outputs or failure objects", objects)
    assert names == {f"outputs/{i}.out" for i in ids[MISSING:]} | {f"failures/{i}-error.out" for i in ids[:MISSING]}
    journal = AsyncJournal(box.state_dir)
    poll("the gateway's journal with nothing unfinished", lambda: not journal.unfinished())
    notes = drain(box, "restart-success") + drain(box, "restart-error")
    counted = Counter(n["inferenceId"] for n in notes)
    assert counted == Counter(ids), (
        f"missing {set(ids) - set(counted)}, twice {[i for i, c in counted.items() if c > 1]}"
    )
    statuses = Counter(n["invocationStatus"] for n in notes)
    assert statuses == Counter({"Completed": REQUESTS - MISSING, "Failed": MISSING})
    answer = json.loads(box.client("s3").get_object(Bucket=BUCKET, Key=f"outputs/{ids[-1]}.out")["Body"].read())
    assert "answer" in answer
    box.client("sagemaker").delete_endpoint(EndpointName=endpoint)  # a later restart need not deploy it again


# All at once, a 900 s bake and a 900 s termination wait: 9 s each at time scale 0.01.
DEPLOYMENT = {
    "BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 900},
        "TerminationWaitInSeconds": 900,
        "MaximumExecutionTimeoutInSeconds": 3600,
    }
}


def baking(fleet: dict[str, Any]) -> bool:
    return (fleet.get("update") or {}).get("share") == 1.0


def test_the_control_plane_killed_mid_update_leaves_each_endpoint_serving_the_config_it_names(box: Box) -> None:
    """One kill catches three updates at three steps, staggered: `retiring` updated first (its old fleet waits out
    the termination wait when the kill comes), `baking` next (all traffic on its new fleet, baking), `starting` last
    (UpdateEndpoint has just answered: its new fleet is starting). An update not yet switched is dropped (the old
    config serves, as after a failed update); one switched serves its new config."""
    sagemaker = box.client("sagemaker")
    configs = {}
    for step in ("retiring", "baking", "starting"):
        endpoint = f"restart-{step}"
        configs[step] = (
            create_config(box, f"{endpoint}-blue", "blue"),
            create_config(box, f"{endpoint}-green", "green"),
        )
        sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=configs[step][0])
    for step in configs:
        in_service(box, f"restart-{step}")

    def update(step: str) -> None:
        sagemaker.update_endpoint(
            EndpointName=f"restart-{step}", EndpointConfigName=configs[step][1], DeploymentConfig=DEPLOYMENT
        )

    def fleet(step: str) -> dict[str, Any]:
        return dict(load_fleet(box.state_dir).get(f"restart-{step}", {}))

    update("retiring")
    poll("retiring's new fleet baking", lambda: baking(fleet("retiring")))
    update("baking")
    poll(
        "baking's new fleet baking, retiring's old one retiring",
        lambda: baking(fleet("baking")) and bool(fleet("retiring").get("retiring")),
    )
    update("starting")

    box.kill(everything=False)
    box.up()

    runtime = box.client("sagemaker-runtime")
    served = {}
    for step, (blue, green) in configs.items():
        endpoint = f"restart-{step}"
        described = in_service(box, endpoint)
        answered = runtime.invoke_endpoint(EndpointName=endpoint, Body=QUESTION, ContentType="application/json")
        assert "answer" in json.loads(answered["Body"].read())
        served[step] = (
            {blue: "blue", green: "green"}[described["EndpointConfigName"]],
            answered["InvokedProductionVariant"],
        )
    assert served == {"retiring": ("green", "green"), "baking": ("blue", "blue"), "starting": ("blue", "blue")}
    sagemaker = box.client("sagemaker")  # the new box's
    for step in configs:  # a later restart need not deploy them again
        sagemaker.delete_endpoint(EndpointName=f"restart-{step}")
