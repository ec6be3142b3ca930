"""The parts that let a box come back from kill -9 whole, each alone and in-process (fast): the gateway's async
journal and the dispatcher resuming from each step it records, the embedded SNS dropping a SageMaker notification
published twice, and the embedded AWS's snapshot restored with its S3 bodies and its endpoints put back to deploy.
(tests/sagebox/box/test_box_restart.py kills real boxes.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sagebox.box import async_inference as aio
from sagebox.box.async_journal import AsyncJournal, Notifying, Written

CONFIG = {
    "OutputConfig": {
        "S3OutputPath": "s3://results/out",
        "S3FailurePath": "s3://results/failed",
        "NotificationConfig": {"SuccessTopic": "arn:ok", "ErrorTopic": "arn:error"},
    }
}


class Store:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], bytes] = {("in", "q.json"): b"{}"}
        self.writes: list[tuple[str, str]] = []
        self.published: list[tuple[str, str]] = []

    def read(self, bucket: str, key: str) -> bytes:
        if (bucket, key) not in self.objects:
            raise aio.AsyncError("NoSuchKey")
        return self.objects[(bucket, key)]

    def write(self, bucket: str, key: str, body: bytes, content_type: str) -> None:
        self.objects[(bucket, key)] = body
        self.writes.append((bucket, key))

    def publish(self, topic_arn: str, message: str) -> None:
        self.published.append((topic_arn, message))

    def exists(self, bucket: str, key: str) -> str | None:
        return "application/json" if (bucket, key) in self.objects else None


def job(inference_id: str = "q") -> aio.Job:
    return aio.Job("ep", inference_id, "s3://in/q.json", "application/json", None, None, CONFIG, 1_700_000_000.0)


def dispatcher(store: Store, journal: AsyncJournal, invoked: list[str]) -> aio.AsyncDispatcher:
    async def invoke(j: aio.Job, body: bytes) -> aio.Answer:
        invoked.append(j.inference_id)
        return aio.Answer(200, b'{"answer": "x"}', "application/json")

    async def offload(fn: Any) -> Any:
        return fn()

    return aio.AsyncDispatcher(store, invoke, lambda endpoint: 1, "us-east-1", offload=offload, journal=journal)


async def settle(d: aio.AsyncDispatcher) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
    await d.aclose()


def test_an_accepted_request_is_journaled_and_done_once_processed(tmp_path: Path) -> None:
    store, journal = Store(), AsyncJournal(tmp_path)
    invoked: list[str] = []

    async def go() -> None:
        d = dispatcher(store, journal, invoked)
        queued = await d.accept(job())
        assert [u.key for u in journal.unfinished()] == [queued.key]
        await settle(d)

    asyncio.run(go())
    assert invoked == ["q"] and store.writes == [("results", "out/q.out")] and len(store.published) == 1
    assert journal.unfinished() == []


@pytest.mark.parametrize("step", ["accepted", "output-in-s3", "written", "notifying"])
def test_a_resumed_request_finishes_from_its_step_once(tmp_path: Path, step: str) -> None:
    """What a gateway killed at each step left is finished by the next one: invoked only if no outcome exists,
    written at most once, notified once (a recorded notification is published word for word)."""
    store, journal = Store(), AsyncJournal(tmp_path)
    invoked: list[str] = []
    journal.accepted("k1", job())
    if step in ("output-in-s3", "written", "notifying"):
        store.objects[("results", "out/q.out")] = b'{"answer": "x"}'
    if step in ("written", "notifying"):
        journal.written("k1", Written(True, "application/json"))
    recorded = json.dumps({"eventSource": "aws:sagemaker", "inferenceId": "q", "recorded": True})
    if step == "notifying":
        journal.notifying("k1", Notifying("arn:ok", recorded))
    journal.close()
    journal = AsyncJournal(tmp_path)

    async def go() -> None:
        d = dispatcher(store, journal, invoked)
        assert d.resume() == 1
        await settle(d)

    asyncio.run(go())
    assert invoked == (["q"] if step == "accepted" else [])
    assert store.writes == ([("results", "out/q.out")] if step == "accepted" else [])
    assert [topic for topic, _ in store.published] == ["arn:ok"]
    message = json.loads(store.published[0][1])
    assert message["inferenceId"] == "q" and (message.get("recorded") is True) == (step == "notifying")
    assert journal.unfinished() == []


def test_a_torn_last_line_is_skipped_and_compaction_keeps_the_unfinished(tmp_path: Path) -> None:
    journal = AsyncJournal(tmp_path)
    journal.accepted("a", job("a"))
    journal.accepted("b", job("b"))
    journal.done("a")
    journal.close()
    with journal.path.open("ab") as fh:
        fh.write(b'{"op":"done","key":"b"')  # killed mid-write
    assert [u.key for u in journal.unfinished()] == ["b"]
    assert [u.key for u in journal.compact()] == ["b"]
    assert len(journal.path.read_text().splitlines()) == 1


def test_the_embedded_sns_delivers_a_sagemaker_notification_once(tmp_path: Path) -> None:
    from moto.sns.models import Topic

    from sagebox.box.embedded_aws import sns_dedupe

    delivered: list[str] = []

    class FakeTopic:
        pass

    original = sns_dedupe._original_publish

    def deliver(self: Any, message: str, *args: Any, **kwargs: Any) -> str:
        delivered.append(message)
        return f"id{len(delivered)}"

    sns_dedupe._original_publish = deliver
    try:
        topic: Any = FakeTopic()
        note = json.dumps({"eventSource": "aws:sagemaker", "inferenceId": "q"})
        assert sns_dedupe.publish(topic, note) == sns_dedupe.publish(topic, note) == "id1"
        sns_dedupe.publish(topic, "plain")
        sns_dedupe.publish(topic, "plain")
    finally:
        sns_dedupe._original_publish = original
    assert delivered == [note, "plain", "plain"]
    assert Topic.publish is not None


def test_a_snapshot_restores_s3_bodies_and_endpoints_are_put_back_to_deploy(tmp_path: Path) -> None:
    import boto3
    from moto import mock_aws

    from sagebox.box.embedded_aws import persistence

    snapshots = persistence.Snapshots(tmp_path / "aws-state")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="bucket")
        s3.put_object(Bucket="bucket", Key="k", Body=b"body" * 1000)
        # What cdk bootstrap writes: an SSM parameter (moto keeps SSM's tags in a defaultdict of a local lambda).
        ssm = boto3.client("ssm", region_name="us-east-1")
        ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="33", Type="String")
        ssm.add_tags_to_resource(ResourceType="Parameter", ResourceId="/cdk-bootstrap/hnb659fds/version",
                                 Tags=[{"Key": "k", "Value": "v"}])  # fmt: skip
        assert snapshots.save() and not snapshots.save()  # nothing changed: nothing written
        assert len(list((tmp_path / "aws-state" / "blobs").iterdir())) == 1
    with mock_aws():
        restored = persistence.Snapshots(tmp_path / "aws-state").restore()
        assert "s3" in restored
        s3 = boto3.client("s3", region_name="us-east-1")
        assert s3.get_object(Bucket="bucket", Key="k")["Body"].read() == b"body" * 1000
        ssm = boto3.client("ssm", region_name="us-east-1")
        assert ssm.get_parameter(Name="/cdk-bootstrap/hnb659fds/version")["Parameter"]["Value"] == "33"
        tags = ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId="/cdk-bootstrap/hnb659fds/version")
        assert tags["TagList"] == [{"Key": "k", "Value": "v"}]

    class Endpoint:
        def __init__(self, status: str) -> None:
            self.endpoint_status = status
            self.endpoint_config_name = "old"
            self.pending_deployment_summary: dict[str, Any] | None = {"EndpointConfigName": "new"}
            self.failure_reason: str | None = None

    endpoints = {"serving": Endpoint("InService"), "updating": Endpoint("Updating"), "dead": Endpoint("Failed")}
    assert persistence.recover_endpoints(SimpleNamespace(endpoints=endpoints)) == ["serving", "updating"]
    updating = endpoints["updating"]
    assert (updating.endpoint_status, updating.pending_deployment_summary) == ("Creating", None)
    assert "serves endpoint config old" in str(updating.failure_reason)
    assert endpoints["dead"].endpoint_status == "Failed"
