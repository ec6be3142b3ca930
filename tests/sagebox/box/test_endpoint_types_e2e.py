"""Production variants, shadow variants, serverless and asynchronous endpoints, executed: endpoints created through
boto3 on the scaled box (time scale 0.01, gateway seeded: tests/sagebox/box/conftest.py) with real serving
processes, and invoked through boto3's `sagemaker-runtime` at the box's gateway, as a user does.

A 90/10 split of two production variants routes within +-5 % over 1,000 requests (counted by the
InvokedProductionVariant of the answers); a shadow variant gets copies of production's requests and
`sagebox shadow-report` writes its JSON and Markdown report; a serverless endpoint scales to zero after its idle
period (600 box seconds, 6 s here), cold-starts on the next call and throttles a second call past its MaxConcurrency
of 1 while the first waits; InvokeEndpointAsync reads its input from S3, writes the answer (or the failure) to S3
and notifies SNS (an SQS queue subscribed in the embedded AWS receives it). Every wait polls observable state (the
activity file the gateway writes, the control plane's fleet file, S3, SQS) with a deadline that only guards against
a hang; the throttled call is sent while the first one waits for its cold start, which the activity file shows.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagebox.box import serverless, shadow
from sagebox.box.inventory import list_endpoints
from sagebox.box.reconciler import ROUTES_FILE, load_fleet
from sagebox.box.routes import load_routes
from sagebox.box.runtime_gateway import Picker
from sagebox.box.state import BoxState
from sagebox.cli.app import main
from tests.sagebox.box.conftest import GATEWAY_SEED, ScaledBox
from tests.sagebox.box.guardrail_models import Behaviour
from tests.sagebox.box.test_guardrails_e2e import DEADLINE_S, IMAGE, QUESTION, ROLE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SPLIT, SHADOW, SERVERLESS, ASYNC = "et-split", "et-shadow", "et-serverless", "et-async"
SPLIT_REQUESTS = 1000
SHADOW_REQUESTS = 40
ASYNC_BUCKET = "et-async"


def model(box: ScaledBox, name: str, behaviour: Behaviour) -> str:
    box.client("sagemaker").create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://models/{behaviour}.tar.gz"},
    )
    return name


def instance_variant(name: str, model_name: str, weight: float = 1.0) -> dict[str, Any]:
    return {
        "VariantName": name,
        "ModelName": model_name,
        "InstanceType": "ml.c6i.xlarge",
        "InitialInstanceCount": 1,
        "InitialVariantWeight": weight,
    }


def poll(what: str, found: Callable[[], Any], deadline_s: float = DEADLINE_S) -> Any:
    """`found()` once it is truthy (polled every 0.1 s); the deadline only guards against a hang."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def box(scaled_box: ScaledBox) -> Iterator[ScaledBox]:
    """One endpoint of each type on the scaled box, created together (their instances start at once), deleted at
    the end so the session's box does not keep their processes."""
    sagemaker = scaled_box.client("sagemaker")
    sns, sqs, s3 = scaled_box.client("sns"), scaled_box.client("sqs"), scaled_box.client("s3")
    s3.create_bucket(Bucket=ASYNC_BUCKET)
    success = sns.create_topic(Name="et-async-success")["TopicArn"]
    error = sns.create_topic(Name="et-async-error")["TopicArn"]
    for topic, queue in ((success, "et-async-success"), (error, "et-async-error")):
        url = sqs.create_queue(QueueName=queue)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})

    configs: dict[str, dict[str, Any]] = {
        SPLIT: {
            "ProductionVariants": [
                instance_variant("a", model(scaled_box, "et-split-a", "good"), 0.9),
                instance_variant("b", model(scaled_box, "et-split-b", "good"), 0.1),
            ]
        },
        SHADOW: {
            "ProductionVariants": [instance_variant("prod", model(scaled_box, "et-shadow-prod", "good"))],
            # Half of production's requests are copied to the shadow (its weight relative to production's).
            "ShadowProductionVariants": [
                instance_variant("candidate", model(scaled_box, "et-shadow-candidate", "other"), 0.5)
            ],
        },
        SERVERLESS: {
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "ModelName": model(scaled_box, "et-serverless", "slower"),  # ~1-2 s a call
                    "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 1},
                }
            ]
        },
        ASYNC: {
            "ProductionVariants": [instance_variant("AllTraffic", model(scaled_box, "et-async", "good"))],
            "AsyncInferenceConfig": {
                "OutputConfig": {
                    "S3OutputPath": f"s3://{ASYNC_BUCKET}/outputs",
                    "S3FailurePath": f"s3://{ASYNC_BUCKET}/failures",
                    "NotificationConfig": {"SuccessTopic": success, "ErrorTopic": error},
                },
                "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 2},
            },
        },
    }
    for name, config in configs.items():
        sagemaker.create_endpoint_config(EndpointConfigName=name, **config)
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    for name in configs:
        sagemaker.get_waiter("endpoint_in_service").wait(
            EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": int(DEADLINE_S)}
        )
    yield scaled_box
    for name in configs:
        sagemaker.delete_endpoint(EndpointName=name)


def test_a_90_10_split_routes_within_5_percent_over_1000_requests_and_target_variant_is_honoured(
    box: ScaledBox,
) -> None:
    counts: Counter[str] = Counter()
    lock = threading.Lock()

    def client_thread(requests: int) -> None:
        runtime = box.client("sagemaker-runtime")
        for _ in range(requests):
            answer = runtime.invoke_endpoint(EndpointName=SPLIT, Body=QUESTION, ContentType="application/json")
            with lock:
                counts[answer["InvokedProductionVariant"]] += 1

    # The gateway's choices come from one seeded generator per endpoint: the split of 1,000 calls is the same
    # whichever client thread sends which call.
    threads = [threading.Thread(target=client_thread, args=(SPLIT_REQUESTS // 4,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts.values()) == SPLIT_REQUESTS and set(counts) == {"a", "b"}
    assert abs(counts["a"] / SPLIT_REQUESTS - 0.9) <= 0.05
    assert abs(counts["b"] / SPLIT_REQUESTS - 0.1) <= 0.05

    runtime = box.client("sagemaker-runtime")
    targeted = {
        runtime.invoke_endpoint(EndpointName=SPLIT, Body=QUESTION, ContentType="application/json", TargetVariant="b")[
            "InvokedProductionVariant"
        ]
        for _ in range(10)
    }
    assert targeted == {"b"}
    with pytest.raises(ClientError) as refused:
        runtime.invoke_endpoint(EndpointName=SPLIT, Body=QUESTION, ContentType="application/json", TargetVariant="c")
    assert refused.value.response["Error"]["Code"] == "ValidationError"

    described = box.client("sagemaker").describe_endpoint(EndpointName=SPLIT)
    assert [(v["VariantName"], v["CurrentWeight"]) for v in described["ProductionVariants"]] == [
        ("a", 0.9),
        ("b", 0.1),
    ]
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))[SPLIT]
    assert [v.describe() for v in shown.variants] == ["a 0.9, 1", "b 0.1, 1"]


def test_a_shadow_gets_copies_and_the_shadow_report_is_written(
    box: ScaledBox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runtime = box.client("sagemaker-runtime")
    answers = Counter(
        runtime.invoke_endpoint(EndpointName=SHADOW, Body=QUESTION, ContentType="application/json")[
            "InvokedProductionVariant"
        ]
        for _ in range(SHADOW_REQUESTS)
    )
    assert answers == {"prod": SHADOW_REQUESTS}  # callers only ever get production's answer

    # The gateway's sampling is seeded per endpoint: replayed with the same seed, it says how many copies it sent.
    replay, route = Picker(seed=GATEWAY_SEED), load_routes(box.aws.state_dir / ROUTES_FILE)[SHADOW]
    copies = 0
    for _ in range(SHADOW_REQUESTS):
        replay.choose(route, None)
        copies += len(replay.mirrored(route))
    assert 0 < copies < SHADOW_REQUESTS  # a sampled share (50 %), not every request
    # The gateway records a copy once both sides answered, and writes the records once a second.
    poll("the shadow's records", lambda: len(shadow.load(box.aws.state_dir, SHADOW)) == copies)
    out = tmp_path / "reports"
    code = main(["shadow-report", SHADOW, "--state-dir", str(box.aws.state_dir), "--out", str(out)])
    assert code == 0 and "wrote " in capsys.readouterr().out
    report = json.loads((out / f"{SHADOW}-shadow-report.json").read_text())
    assert report["variants"] == {"production": ["prod"], "shadow": ["candidate"]}
    # Every sampled copy reached the shadow (none dropped: one request at a time), each compared with production.
    assert (report["requests"], report["mirrored"], report["dropped"], report["compared"]) == (
        copies,
        copies,
        0,
        copies,
    )
    assert (report["production_errors"], report["shadow_errors"]) == (0, 0)
    assert 0.0 <= report["agreement"] <= 1.0 and 0.0 <= report["exact_match"] <= report["f1"] <= 100.0
    assert report["exact_match"] == pytest.approx(100.0 * report["agreement"])
    for side in ("production_latency", "shadow_latency"):
        assert 0 < report[side]["p50_ms"] <= report[side]["p90_ms"]
    markdown = (out / f"{SHADOW}-shadow-report.md").read_text()
    assert markdown.startswith(f"# Shadow report: {SHADOW}") and "| P90 latency (ms) |" in markdown
    assert f"{copies} request(s) sampled for a copy" in markdown
    assert "- answer agreement: " in markdown and "- F1 of the shadow's answers against production's: " in markdown

    described = box.client("sagemaker").describe_endpoint(EndpointName=SHADOW)
    assert [v["VariantName"] for v in described["ShadowProductionVariants"]] == ["candidate"]
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))[SHADOW]
    assert [v.describe() for v in shown.variants] == ["prod 1, 1", "candidate (shadow), 1"]
    assert f"`sagebox shadow-report {SHADOW}`" in shown.shadow


def serverless_state(box: ScaledBox) -> dict[str, Any]:
    """What the control plane's fleet file says of the serverless variant (what `sagebox status` shows)."""
    variants = load_fleet(box.aws.state_dir).get(SERVERLESS, {}).get("variants", [])
    return dict(variants[0]["serverless"]) if variants else {}


def waiting(box: ScaledBox) -> int:
    """The serverless variant's calls waiting for a cold start, as the gateway's activity file says (the gateway
    writes it the moment a call starts waiting, for the control plane to start an instance)."""
    key = (SERVERLESS, "AllTraffic")
    return serverless.read_activity(box.aws.state_dir).get(key, serverless.Activity()).waiting


def test_a_serverless_endpoint_scales_to_zero_cold_starts_and_throttles_past_its_concurrency(box: ScaledBox) -> None:
    # No request for the idle period (600 box seconds from InService or the last call): the variant scales to zero.
    cold = poll("the variant scaled to zero", lambda: (s := serverless_state(box))["state"] == "cold" and s)
    assert cold["scaled_to_zero"] >= 1
    assert load_fleet(box.aws.state_dir)[SERVERLESS]["variants"][0]["instances"] == []
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))[SERVERLESS]
    assert shown.kind == "serverless" and shown.variants[0].describe().endswith("2048 MB, max 1 at once: cold")

    # The next call waits for a cold start. While it waits (and then runs the ~1 s model), it is the one invocation
    # MaxConcurrency allows: a second call is throttled.
    runtime, second = box.client("sagemaker-runtime"), box.client("sagemaker-runtime")
    first: dict[str, Any] = {}

    def call() -> None:
        first["answer"] = runtime.invoke_endpoint(
            EndpointName=SERVERLESS, Body=QUESTION, ContentType="application/json"
        )

    worker = threading.Thread(target=call)
    worker.start()
    poll("the first call waiting for its cold start", lambda: waiting(box) == 1)
    with pytest.raises(ClientError) as throttled:
        second.invoke_endpoint(EndpointName=SERVERLESS, Body=QUESTION, ContentType="application/json")
    worker.join()
    assert throttled.value.response["Error"]["Code"] == "ThrottlingException"
    assert throttled.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429
    answer = first["answer"]
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    assert int(answer["ResponseMetadata"]["HTTPHeaders"]["x-sagebox-cold-start-ms"]) >= 0  # it waited, and says so
    warm = serverless_state(box)
    assert warm["state"] == "warm" and warm["cold_starts"] == cold["cold_starts"] + 1
    assert warm["last_cold_start_s"] is not None and warm["last_cold_start_s"] > 0
    described = box.client("sagemaker").describe_endpoint(EndpointName=SERVERLESS)
    [summary] = described["ProductionVariants"]
    assert summary["CurrentServerlessConfig"] == {"MemorySizeInMB": 2048, "MaxConcurrency": 1}
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))[SERVERLESS]
    assert shown.variants[0].describe().endswith(": warm")
    assert f"{warm['cold_starts']} cold start(s)" in shown.serverless


def received(box: ScaledBox, queue: str) -> dict[str, Any]:
    """The one SNS notification delivered to `queue` (raw message delivery: the message is SageMaker's JSON)."""
    sqs = box.client("sqs")
    url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
    messages = poll(
        f"a notification in {queue}",
        lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages"),
    )
    assert len(messages) == 1
    return dict(json.loads(messages[0]["Body"]))


def test_an_async_request_reads_s3_writes_its_answer_to_s3_and_notifies_sns(box: ScaledBox) -> None:
    s3 = box.client("s3")
    s3.put_object(Bucket=ASYNC_BUCKET, Key="inputs/q1.json", Body=QUESTION.encode())
    runtime = box.client("sagemaker-runtime")
    queued = runtime.invoke_endpoint_async(
        EndpointName=ASYNC,
        InputLocation=f"s3://{ASYNC_BUCKET}/inputs/q1.json",
        ContentType="application/json",
        InferenceId="q1",
    )
    assert queued["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert (queued["InferenceId"], queued["OutputLocation"]) == ("q1", f"s3://{ASYNC_BUCKET}/outputs/q1.out")

    def output() -> bytes | None:
        try:
            return bytes(s3.get_object(Bucket=ASYNC_BUCKET, Key="outputs/q1.out")["Body"].read())
        except ClientError:
            return None

    answer = json.loads(poll("the async answer in S3", output))
    sync = box.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=ASYNC, Body=QUESTION, ContentType="application/json"
    )
    assert answer == json.loads(sync["Body"].read())  # the same model's answer, written to S3
    note = received(box, "et-async-success")
    assert (note["invocationStatus"], note["inferenceId"]) == ("Completed", "q1")
    assert note["responseParameters"]["outputLocation"] == queued["OutputLocation"]
    assert note["requestParameters"]["inputLocation"] == f"s3://{ASYNC_BUCKET}/inputs/q1.json"

    # An input that is not there: the failure goes to S3FailurePath and the error topic.
    missing = runtime.invoke_endpoint_async(
        EndpointName=ASYNC, InputLocation=f"s3://{ASYNC_BUCKET}/inputs/nope.json", ContentType="application/json"
    )
    failure_key = missing["FailureLocation"].removeprefix(f"s3://{ASYNC_BUCKET}/")
    assert failure_key == f"failures/{missing['InferenceId']}-error.out"

    def failure() -> bytes | None:
        try:
            return bytes(s3.get_object(Bucket=ASYNC_BUCKET, Key=failure_key)["Body"].read())
        except ClientError:
            return None

    assert "Failed to read the input" in poll("the async failure in S3", failure).decode()
    note = received(box, "et-async-error")
    assert (note["invocationStatus"], note["inferenceId"]) == ("Failed", missing["InferenceId"])

    def backlog_published() -> bool:
        answer = box.client("cloudwatch").get_metric_statistics(
            Namespace="AWS/SageMaker",
            MetricName="ApproximateBacklogSize",
            Dimensions=[{"Name": "EndpointName", "Value": ASYNC}],
            StartTime=box.started - datetime.timedelta(minutes=1),
            EndTime=datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=1),
            Period=60,
            Statistics=["SampleCount"],
        )
        return bool(answer["Datapoints"])

    poll("ApproximateBacklogSize in CloudWatch", backlog_published)  # the queue's depth, which autoscaling tracks
    shown = list_endpoints(BoxState(), box.aws.state_dir, box.client("sagemaker"))[ASYNC]
    assert shown.kind == "async" and shown.asynchronous.startswith(f"answers to s3://{ASYNC_BUCKET}/outputs")
