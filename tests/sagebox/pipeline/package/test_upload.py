from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sagebox.errors import SageboxError
from sagebox.pipeline.package.upload import MIN_PART_BYTES, expected_checksum, upload_artifact

BUCKET = "sagebox-models"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def _file(tmp_path: Path, size: int) -> Path:
    path = tmp_path / "model.tar.gz"
    path.write_bytes(os.urandom(size))
    return path


def test_single_part_upload_carries_and_verifies_sha256(s3: Any, tmp_path: Path) -> None:
    path = _file(tmp_path, 300_000)
    result = upload_artifact(s3, path, BUCKET, "models/a/model.tar.gz", verify_download=True)
    digest = hashlib.sha256(path.read_bytes())
    assert result.sha256 == digest.hexdigest()
    assert result.checksum_sha256 == base64.b64encode(digest.digest()).decode()
    assert result.parts == 1
    assert result.uri == f"s3://{BUCKET}/models/a/model.tar.gz"
    stored = s3.get_object(Bucket=BUCKET, Key="models/a/model.tar.gz")
    assert stored["Body"].read() == path.read_bytes()
    head = s3.head_object(Bucket=BUCKET, Key="models/a/model.tar.gz", ChecksumMode="ENABLED")
    assert head["ChecksumSHA256"] == result.checksum_sha256
    assert head["Metadata"]["sha256"] == digest.hexdigest()


def test_multipart_upload_sends_per_part_checksums(s3: Any, tmp_path: Path) -> None:
    path = _file(tmp_path, 2 * MIN_PART_BYTES + 12345)
    result = upload_artifact(s3, path, BUCKET, "big.tar.gz", part_bytes=MIN_PART_BYTES, verify_download=True)
    assert result.parts == 3
    data = path.read_bytes()
    parts = [hashlib.sha256(data[i : i + MIN_PART_BYTES]).digest() for i in range(0, len(data), MIN_PART_BYTES)]
    assert result.checksum_sha256 == expected_checksum(parts)
    assert result.checksum_sha256.endswith("-3")
    assert s3.get_object(Bucket=BUCKET, Key="big.tar.gz")["Body"].read() == data
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []


class _CorruptingClient:
    """A transport that flips a byte of every body it sends (what S3's checksum check exists to catch)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def put_object(self, **kwargs: Any) -> Any:
        body = kwargs["Body"].read()
        kwargs["Body"] = bytes([body[0] ^ 0xFF]) + body[1:]
        return self._inner.put_object(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_read_back_catches_a_corrupted_transfer(s3: Any, tmp_path: Path) -> None:
    # moto stores the checksum header without checking it (real S3 would reject the PUT with BadDigest), so
    # the read-back catches it: botocore checks the body against the stored checksum, then we hash it.
    path = _file(tmp_path, 1000)
    with pytest.raises(SageboxError, match=r"(reads back with sha256|did not match calculated checksum)"):
        upload_artifact(_CorruptingClient(s3), path, BUCKET, "corrupt.tar.gz", verify_download=True)


def test_failed_multipart_is_aborted(s3: Any, tmp_path: Path) -> None:
    class FailingParts(_CorruptingClient):
        def upload_part(self, **kwargs: Any) -> Any:
            if kwargs["PartNumber"] == 2:
                raise OSError("connection reset")
            return self._inner.upload_part(**kwargs)

    path = _file(tmp_path, 2 * MIN_PART_BYTES + 1)
    with pytest.raises(SageboxError, match="connection reset"):
        upload_artifact(FailingParts(s3), path, BUCKET, "half.tar.gz", part_bytes=MIN_PART_BYTES)
    assert s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    assert "Contents" not in s3.list_objects_v2(Bucket=BUCKET)


def test_user_errors_are_one_line(s3: Any, tmp_path: Path) -> None:
    path = _file(tmp_path, 10)
    with pytest.raises(SageboxError, match="NoSuchBucket") as info:
        upload_artifact(s3, path, "no-such-bucket", "k")
    assert "\n" not in str(info.value)
    with pytest.raises(SageboxError, match="does not exist"):
        upload_artifact(s3, tmp_path / "missing.tar.gz", BUCKET, "k")
    with pytest.raises(SageboxError, match="part size"):
        upload_artifact(s3, path, BUCKET, "k", part_bytes=1024)
    with pytest.raises(SageboxError, match="object key"):
        upload_artifact(s3, path, BUCKET, "/abs")
