"""Endpoint logs in the box, read as an operator reads them on AWS: every instance's output in CloudWatch Logs
(group /aws/sagemaker/Endpoints/<endpoint>, stream <variant>/<instance id>), a failed endpoint's reason there too,
the group kept after the endpoint is deleted; `sagebox logs` reads the same API."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from sagebox.box.reconciler import load_fleet
from tests.conftest import EmbeddedAws
from tests.sagebox.box.test_embedded_aws import create, tarball, upload

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]


def group_events(box: EmbeddedAws, endpoint: str, pattern: str = "") -> list[dict[str, Any]]:
    logs = box.client("logs")
    request = {
        "logGroupName": f"/aws/sagemaker/Endpoints/{endpoint}",
        **({"filterPattern": pattern} if pattern else {}),
    }
    return list(logs.get_paginator("filter_log_events").paginate(**request).search("events[]"))


def eventually(found: Any, polls: int = 100) -> Any:
    """What `found()` returns once it is truthy (the shipper writes every 0.25 s)."""
    for _ in range(polls):
        value = found()
        if value:
            return value
        time.sleep(0.1)
    return found()


def wait_status(box: EmbeddedAws, name: str, wanted: str) -> dict[str, Any]:
    sagemaker = box.client("sagemaker")
    for _ in range(600):
        described = sagemaker.describe_endpoint(EndpointName=name)
        if described["EndpointStatus"] == wanted:
            return dict(described)
        time.sleep(0.2)
    raise AssertionError(f"{name} never became {wanted}: {described}")


def test_each_instance_logs_to_its_own_stream_and_the_group_outlives_the_endpoint(
    embedded_aws: EmbeddedAws, tiny_model_tarball: Path
) -> None:
    create(embedded_aws, "logs-good", upload(embedded_aws, "logs-good/model.tar.gz", tiny_model_tarball.read_bytes()))
    embedded_aws.wait_in_service("logs-good")
    [instance] = load_fleet(embedded_aws.state_dir)["logs-good"]["variants"][0]["instances"]
    assert re.fullmatch(r"i-[0-9a-f]{17}", instance["instance_id"])
    logs = embedded_aws.client("logs")
    [stream] = logs.describe_log_streams(logGroupName="/aws/sagemaker/Endpoints/logs-good")["logStreams"]
    assert stream["logStreamName"] == f"AllTraffic/{instance['instance_id']}"
    ready = eventually(lambda: [e for e in group_events(embedded_aws, "logs-good") if "model ready" in e["message"]])
    assert ready and ready[0]["timestamp"] > 1_700_000_000_000  # epoch milliseconds
    read = logs.get_log_events(
        logGroupName="/aws/sagemaker/Endpoints/logs-good", logStreamName=stream["logStreamName"], startFromHead=True
    )
    assert any("serving on port" in e["message"] for e in read["events"])

    embedded_aws.client("sagemaker").delete_endpoint(EndpointName="logs-good")
    drained = eventually(lambda: [e for e in group_events(embedded_aws, "logs-good") if "SIGTERM" in e["message"]])
    assert drained, group_events(embedded_aws, "logs-good")  # the instance's last words, after the endpoint is gone


def test_a_failed_endpoint_shows_its_reason_in_its_logs(embedded_aws: EmbeddedAws, capsys: Any) -> None:
    from sagebox.cli.app import main

    create(embedded_aws, "logs-broken", upload(embedded_aws, "logs-broken/m.tar.gz", tarball({"manifest.json": b"{}"})))
    reason = wait_status(embedded_aws, "logs-broken", "Failed")["FailureReason"]
    assert "model refused:" in reason
    said = eventually(lambda: group_events(embedded_aws, "logs-broken", '"model refused"'))
    messages = [e["message"] for e in said]
    assert any("ERROR sagebox.server" in m and "model refused:" in m for m in messages)  # the container's own line
    assert f"sagebox: {reason}" in messages  # and the reason, word for word as FailureReason gives it

    create(embedded_aws, "logs-junk", upload(embedded_aws, "logs-junk/m.tar.gz", b"not a tarball"))
    junk = wait_status(embedded_aws, "logs-junk", "Failed")["FailureReason"]
    assert "Failed to extract model data archive" in junk
    # No instance ever started: the reason is in the stream of the one that would have.
    [event] = eventually(lambda: group_events(embedded_aws, "logs-junk"))
    assert event["message"] == f"sagebox: {junk}" and re.fullmatch(r"AllTraffic/i-[0-9a-f]{17}", event["logStreamName"])

    with pytest.MonkeyPatch.context() as env:
        env.setenv("SAGEBOX_STATE_DIR", str(embedded_aws.state_dir))
        assert main(["logs", "logs-broken", "--filter", "sagebox:", "--since", "1h"]) == 0
        printed = capsys.readouterr().out
        assert main(["logs", "no-such-endpoint"]) == 1
        assert "no logs for endpoint no-such-endpoint" in capsys.readouterr().err
    [line] = printed.splitlines()
    assert re.match(r"^\d{4}-\d\d-\d\dT[\d:.]+\+00:00 AllTraffic/i-[0-9a-f]{17} sagebox: ", line) and reason in line
