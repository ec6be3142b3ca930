"""Upload an artifact to S3 with SHA-256 checksums that S3 verifies on receipt, then check what S3 stored."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError

DEFAULT_PART_BYTES = 64 * 1024 * 1024
MIN_PART_BYTES = 5 * 1024 * 1024  # S3's floor for every part but the last
SHA256_METADATA_KEY = "sha256"
_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class UploadResult:
    bucket: str
    key: str
    uri: str
    bytes: int
    sha256: str  # hex digest of the whole file
    checksum_sha256: str  # what S3 reports: base64 digest, or "<base64 of digests>-<parts>" for multipart
    parts: int
    version_id: str | None


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


def _part_digests(path: Path, part_bytes: int) -> tuple[str, list[bytes], int]:
    whole = hashlib.sha256()
    parts: list[bytes] = []
    size = 0
    with path.open("rb") as fh:
        while chunk := fh.read(part_bytes):
            whole.update(chunk)
            parts.append(hashlib.sha256(chunk).digest())
            size += len(chunk)
    return whole.hexdigest(), parts, size


def expected_checksum(part_digests: list[bytes]) -> str:
    """S3's ChecksumSHA256 for an object uploaded in these parts (a single PUT has no "-N" suffix)."""
    if len(part_digests) <= 1:
        return _b64(part_digests[0] if part_digests else hashlib.sha256(b"").digest())
    return f"{_b64(hashlib.sha256(b''.join(part_digests)).digest())}-{len(part_digests)}"


def _client_error(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return f"{error.get('Code', type(exc).__name__)}: {error.get('Message', '')}".rstrip(": ")
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def upload_artifact(
    s3: Any,
    path: Path,
    bucket: str,
    key: str,
    part_bytes: int = DEFAULT_PART_BYTES,
    progress: Callable[[int, int], None] | None = None,
    verify_download: bool = False,
) -> UploadResult:
    """Upload `path` through the injected boto3 S3 client. Every request carries its SHA-256 (S3 rejects a
    body that does not match), then the stored checksum is compared with the local one; `verify_download`
    also reads the object back and hashes it."""
    path = Path(path)
    if not path.is_file():
        raise SageboxError(f"artifact {path} does not exist")
    if part_bytes < MIN_PART_BYTES:
        raise SageboxError(f"part size must be at least {MIN_PART_BYTES} bytes")
    if not bucket or not key or key.startswith("/"):
        raise SageboxError("give a bucket name and an object key that does not start with '/'")
    sha256_hex, digests, size = _part_digests(path, part_bytes)
    metadata = {SHA256_METADATA_KEY: sha256_hex}
    try:
        if len(digests) <= 1:
            with path.open("rb") as fh:
                s3.put_object(
                    Bucket=bucket,
                    Key=key,
                    Body=fh,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=expected_checksum(digests),
                    Metadata=metadata,
                )
            if progress:
                progress(size, size)
        else:
            _multipart(s3, path, bucket, key, part_bytes, digests, metadata, progress)
        head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    except SageboxError:
        raise
    except Exception as exc:  # botocore raises ClientError / EndpointConnectionError / NoCredentialsError...
        raise SageboxError(f"upload to s3://{bucket}/{key} failed: {_client_error(exc)}") from None
    stored = head.get("ChecksumSHA256")
    expected = expected_checksum(digests)
    if not same_checksum(stored, expected) or int(head.get("ContentLength", -1)) != size:
        raise SageboxError(
            f"s3://{bucket}/{key} does not match the local file after upload "
            f"(checksum {stored!r} vs {expected!r}, {head.get('ContentLength')} vs {size} bytes)"
        )
    if verify_download:
        downloaded = _download_sha256(s3, bucket, key)
        if downloaded != sha256_hex:
            raise SageboxError(f"s3://{bucket}/{key} reads back with sha256 {downloaded}, expected {sha256_hex}")
    uri = f"s3://{bucket}/{key}"
    return UploadResult(bucket, key, uri, size, sha256_hex, expected, len(digests), head.get("VersionId"))


def same_checksum(stored: str | None, expected: str) -> bool:
    """S3 reports a multipart checksum as "<digest>-<parts>"; some S3-compatible stores drop the suffix."""
    return stored is not None and (stored == expected or stored == expected.split("-")[0])


def _download_sha256(s3: Any, bucket: str, key: str) -> str:
    digest = hashlib.sha256()
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        while chunk := body.read(_READ_BYTES):
            digest.update(chunk)
    except Exception as exc:
        raise SageboxError(f"reading back s3://{bucket}/{key} failed: {_client_error(exc)}") from None
    return digest.hexdigest()


def _multipart(
    s3: Any,
    path: Path,
    bucket: str,
    key: str,
    part_bytes: int,
    digests: list[bytes],
    metadata: dict[str, str],
    progress: Callable[[int, int], None] | None,
) -> None:
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key, ChecksumAlgorithm="SHA256", Metadata=metadata)[
        "UploadId"
    ]
    total = path.stat().st_size
    try:
        parts = []
        with path.open("rb") as fh:
            for number, digest in enumerate(digests, start=1):
                body = fh.read(part_bytes)
                if hashlib.sha256(body).digest() != digest:
                    raise SageboxError(f"{path} changed during the upload")
                response = s3.upload_part(
                    Bucket=bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=body,
                    ChecksumAlgorithm="SHA256",
                    ChecksumSHA256=_b64(digest),
                )
                parts.append({"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": _b64(digest)})
                if progress:
                    progress(min(number * part_bytes, total), total)
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts})
    except BaseException:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        raise
