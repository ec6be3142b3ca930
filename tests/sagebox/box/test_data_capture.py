"""Data capture records and files, as SageMaker writes them: sampling, encodings, modes, keys."""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import random

import pytest

from sagebox.box.data_capture import CaptureConfig, Capturer, split_destination

RAW = {
    "EnableCapture": True,
    "InitialSamplingPercentage": 100,
    "DestinationS3Uri": "s3://captures/data-capture/",
    "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
    "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
    "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"], "CsvContentTypes": ["text/csv"]},
}
# 2026-12-02 05:31:07.250 UTC
WHEN = datetime.datetime(2026, 12, 2, 5, 31, 7, 250000, tzinfo=datetime.UTC).timestamp()


def capturer(seed: int = 0) -> Capturer:
    ids = itertools.count()
    return Capturer(random.Random(seed), new_id=lambda: f"id-{next(ids)}")


def test_the_config_reads_the_api_shape_and_describes_it_back() -> None:
    config = CaptureConfig.of(RAW)
    assert (config.destination, config.sampling_percent, config.capture_input, config.capture_output) == (
        "s3://captures/data-capture",
        100,
        True,
        True,
    )
    assert CaptureConfig.of(config.describe()) == config
    both = CaptureConfig.of({**RAW, "CaptureOptions": [{"CaptureMode": "InputAndOutput"}]})
    assert both.capture_input and both.capture_output
    assert not CaptureConfig.of({**RAW, "CaptureOptions": [{"CaptureMode": "Output"}]}).capture_input
    assert CaptureConfig.of({k: v for k, v in RAW.items() if k != "EnableCapture"}).enabled  # enabled by default


@pytest.mark.parametrize(
    ("body", "content_type", "encoding", "data"),
    [
        (b'{"question": "caf\xc3\xa9"}', "application/json; charset=utf-8", "JSON", '{"question": "café"}'),
        (b"1,2,3", "text/csv", "CSV", "1,2,3"),
        (b"\x00\x01", "application/octet-stream", "BASE64", "AAE="),
        (b"\xff{}", "application/json", "BASE64", base64.b64encode(b"\xff{}").decode()),  # not UTF-8 after all
    ],
)
def test_bodies_are_text_for_the_configured_types_and_base64_otherwise(
    body: bytes, content_type: str, encoding: str, data: str
) -> None:
    encoded = CaptureConfig.of(RAW).encode(body, content_type, "INPUT")
    assert encoded == {"observedContentType": content_type, "mode": "INPUT", "data": data, "encoding": encoding}


def test_with_no_content_types_configured_everything_is_base64() -> None:
    config = CaptureConfig.of({k: v for k, v in RAW.items() if k != "CaptureContentTypeHeader"})
    assert config.encode(b"{}", "application/json", "OUTPUT")["encoding"] == "BASE64"


def test_records_and_files_follow_sagemakers_layout() -> None:
    capture = capturer()
    config = CaptureConfig.of(RAW)
    request, response = (b'{"q": 1}', "application/json"), (b'{"a": 2}', "application/json")
    assert capture.offer(config, "qa", "AllTraffic", request, response, WHEN, inference_id="trace-9")
    assert capture.offer(config, "qa", "AllTraffic", request, response, WHEN + 3600)  # the next hour: another file
    files = capture.drain()
    assert capture.drain() == []
    assert [(f.bucket, f.key) for f in files] == [
        ("captures", "data-capture/qa/AllTraffic/2026/12/02/05/31-07-250-id-2.jsonl"),
        ("captures", "data-capture/qa/AllTraffic/2026/12/02/06/31-07-250-id-3.jsonl"),
    ]
    assert files[0].kms_key_id == RAW["KmsKeyId"]
    (record,) = [json.loads(line) for line in files[0].body.decode().splitlines()]
    assert record == {
        "captureData": {
            "endpointInput": {
                "observedContentType": "application/json",
                "mode": "INPUT",
                "data": '{"q": 1}',
                "encoding": "JSON",
            },
            "endpointOutput": {
                "observedContentType": "application/json",
                "mode": "OUTPUT",
                "data": '{"a": 2}',
                "encoding": "JSON",
            },
        },
        "eventMetadata": {"eventId": "id-0", "inferenceTime": "2026-12-02T05:31:07Z", "inferenceId": "trace-9"},
        "eventVersion": "0",
    }


def test_sampling_takes_its_share_the_same_way_every_run() -> None:
    config = CaptureConfig.of({**RAW, "InitialSamplingPercentage": 30})
    pair = (b"{}", "application/json")
    first = capturer(seed=5)
    taken = [first.offer(config, "qa", "v", pair, pair, WHEN) for _ in range(1000)]
    again = capturer(seed=5)
    assert taken == [again.offer(config, "qa", "v", pair, pair, WHEN) for _ in range(1000)]
    assert 250 <= sum(taken) <= 350
    never = capturer()
    assert not any(
        never.offer(CaptureConfig.of({**RAW, "InitialSamplingPercentage": 0}), "qa", "v", pair, pair, WHEN)
        for _ in range(100)
    )
    assert not never.offer(CaptureConfig.of({**RAW, "EnableCapture": False}), "qa", "v", pair, pair, WHEN)
    assert never.drain() == []


def test_an_input_only_capture_holds_no_output() -> None:
    capture = capturer()
    config = CaptureConfig.of({**RAW, "CaptureOptions": [{"CaptureMode": "Input"}]})
    capture.offer(config, "qa", "v", (b"{}", "application/json"), (b"secret", "application/json"), WHEN)
    (file,) = capture.drain()
    assert set(json.loads(file.body)["captureData"]) == {"endpointInput"}


@pytest.mark.parametrize(
    ("destination", "expected"),
    [("s3://b", ("b", "")), ("s3://b/p/q/", ("b", "p/q")), ("https://b/p", ("b", "p"))],
)
def test_destinations_split_into_bucket_and_prefix(destination: str, expected: tuple[str, str]) -> None:
    assert split_destination(destination) == expected
