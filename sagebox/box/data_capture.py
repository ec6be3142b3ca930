"""Data capture as a real-time endpoint does it: a sampled share of invocations written to S3 as JSON Lines.

An endpoint config's DataCaptureConfig (https://docs.aws.amazon.com/sagemaker/latest/APIReference/
API_DataCaptureConfig.html) says where (DestinationS3Uri), how much (InitialSamplingPercentage), what (CaptureOptions:
Input, Output or InputAndOutput) and how bodies are encoded (CaptureContentTypeHeader: JSON and CSV types are kept as
text, everything else is base64, as when no types are given). SageMaker writes the records to
`<DestinationS3Uri>/<endpoint>/<variant>/yyyy/mm/dd/hh/<mm-ss-mmm>-<uuid>.jsonl`, one record per line with
`captureData.endpointInput` / `endpointOutput` (observedContentType, mode, data, encoding) and `eventMetadata`
(eventId, inferenceTime, inferenceId when the caller gave one)
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-monitor-data-capture-endpoint.html). Pure logic: the gateway
offers invocations and writes what `drain` returns.
"""

from __future__ import annotations

import base64
import datetime
import json
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CaptureConfig:
    destination: str  # s3://bucket[/prefix], without a trailing slash
    sampling_percent: int
    capture_input: bool
    capture_output: bool
    json_types: tuple[str, ...] = ()
    csv_types: tuple[str, ...] = ()
    kms_key_id: str | None = None
    enabled: bool = True

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> CaptureConfig:
        modes = {str(option.get("CaptureMode", "")) for option in raw.get("CaptureOptions") or ()}
        types = dict(raw.get("CaptureContentTypeHeader") or {})
        return cls(
            destination=str(raw.get("DestinationS3Uri", "")).rstrip("/"),
            sampling_percent=int(raw.get("InitialSamplingPercentage", 0)),
            capture_input=bool(modes & {"Input", "InputAndOutput"}),
            capture_output=bool(modes & {"Output", "InputAndOutput"}),
            json_types=tuple(str(t).lower() for t in types.get("JsonContentTypes") or ()),
            csv_types=tuple(str(t).lower() for t in types.get("CsvContentTypes") or ()),
            kms_key_id=raw.get("KmsKeyId") or None,
            enabled=bool(raw.get("EnableCapture", True)),
        )

    def describe(self) -> dict[str, Any]:
        """As the endpoint config gives it (what the route table stores)."""
        modes = [m for m, on in (("Input", self.capture_input), ("Output", self.capture_output)) if on]
        described: dict[str, Any] = {
            "EnableCapture": self.enabled,
            "InitialSamplingPercentage": self.sampling_percent,
            "DestinationS3Uri": self.destination,
            "CaptureOptions": [{"CaptureMode": m} for m in modes],
        }
        if self.json_types or self.csv_types:
            described["CaptureContentTypeHeader"] = {
                k: list(v) for k, v in (("JsonContentTypes", self.json_types), ("CsvContentTypes", self.csv_types)) if v
            }
        if self.kms_key_id:
            described["KmsKeyId"] = self.kms_key_id
        return described

    def summary(self) -> dict[str, Any]:
        """As DescribeEndpoint gives it (DataCaptureConfigSummary): the box captures whenever capture is enabled."""
        summary: dict[str, Any] = {
            "EnableCapture": self.enabled,
            "CaptureStatus": "Started" if self.enabled else "Stopped",
            "CurrentSamplingPercentage": self.sampling_percent,
            "DestinationS3Uri": self.destination,
        }
        if self.kms_key_id:
            summary["KmsKeyId"] = self.kms_key_id
        return summary

    def encode(self, body: bytes, content_type: str, mode: str) -> dict[str, str]:
        media = content_type.split(";", 1)[0].strip().lower()
        encoding = "JSON" if media in self.json_types else "CSV" if media in self.csv_types else "BASE64"
        data = None
        if encoding != "BASE64":
            try:
                data = body.decode("utf-8")
            except UnicodeDecodeError:
                encoding = "BASE64"  # not text after all: kept whole, as bytes
        if data is None:
            data = base64.b64encode(body).decode("ascii")
        return {"observedContentType": content_type, "mode": mode, "data": data, "encoding": encoding}


@dataclass(frozen=True)
class CaptureFile:
    bucket: str
    key: str
    body: bytes
    kms_key_id: str | None


def split_destination(destination: str) -> tuple[str, str]:
    """(bucket, key prefix) of an s3:// or https:// destination."""
    rest = destination.split("://", 1)[-1]
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


@dataclass
class Capturer:
    """Samples invocations and groups their records into one file per endpoint, variant and hour of a flush."""

    rng: random.Random = field(default_factory=random.Random)
    new_id: Callable[[], str] = lambda: str(uuid.uuid4())
    _pending: dict[tuple[str, str, str, str | None], list[tuple[float, str]]] = field(default_factory=dict)

    def offer(
        self,
        config: CaptureConfig,
        endpoint: str,
        variant: str,
        request: tuple[bytes, str],
        response: tuple[bytes, str],
        when: float,
        inference_id: str | None = None,
    ) -> bool:
        """Record this invocation if capture is on and it is sampled; True when it was."""
        if not config.enabled or not (config.capture_input or config.capture_output):
            return False
        if self.rng.random() * 100 >= config.sampling_percent:
            return False
        data: dict[str, Any] = {}
        if config.capture_input:
            data["endpointInput"] = config.encode(request[0], request[1], "INPUT")
        if config.capture_output:
            data["endpointOutput"] = config.encode(response[0], response[1], "OUTPUT")
        metadata = {"eventId": self.new_id(), "inferenceTime": _iso(when)}
        if inference_id:
            metadata["inferenceId"] = inference_id
        line = json.dumps({"captureData": data, "eventMetadata": metadata, "eventVersion": "0"}, ensure_ascii=False)
        key = (config.destination, endpoint, variant, config.kms_key_id)
        self._pending.setdefault(key, []).append((when, line))
        return True

    def drain(self) -> list[CaptureFile]:
        """The files to write for what was recorded since the last drain (one per endpoint, variant and hour)."""
        pending, self._pending = self._pending, {}
        files = []
        for (destination, endpoint, variant, kms), records in pending.items():
            hours: dict[str, list[tuple[float, str]]] = {}
            for when, line in records:
                hours.setdefault(_utc(when).strftime("%Y/%m/%d/%H"), []).append((when, line))
            bucket, prefix = split_destination(destination)
            for hour, lines in hours.items():
                first = _utc(lines[0][0])
                name = f"{first:%M-%S}-{first.microsecond // 1000:03d}-{self.new_id()}.jsonl"
                key = "/".join(p for p in (prefix, endpoint, variant, hour, name) if p)
                body = "".join(line + "\n" for _, line in lines).encode("utf-8")
                files.append(CaptureFile(bucket, key, body, kms))
        return files


def _utc(when: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(when, datetime.UTC)


def _iso(when: float) -> str:
    return _utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")
