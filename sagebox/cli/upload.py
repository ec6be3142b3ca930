"""`sagebox upload`: put an artifact in S3 with SHA-256 checksums, and verify what S3 stored."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sagebox.cli.common import console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("upload", help="upload model.tar.gz to S3 with SHA-256 checksums")
    p.add_argument("--artifact", type=Path, required=True, help="file to upload (e.g. model.tar.gz)")
    p.add_argument("--bucket", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--endpoint-url", help="S3 endpoint (e.g. the embedded moto server)")
    p.add_argument("--region", help="AWS region (default: from the environment/profile)")
    p.add_argument("--profile", help="AWS profile name")
    p.add_argument("--part-size-mb", type=int, default=64, help="multipart part size (min 5)")
    p.add_argument("--verify-download", action="store_true", help="read the object back and compare its sha256")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import boto3

    from sagebox.pipeline.package.upload import upload_artifact

    session = boto3.session.Session(profile_name=args.profile, region_name=args.region)
    s3 = session.client("s3", endpoint_url=args.endpoint_url)
    result = upload_artifact(
        s3,
        args.artifact,
        args.bucket,
        args.key,
        args.part_size_mb * 1024 * 1024,
        verify_download=args.verify_download,
    )
    if args.json:
        print(json.dumps(result.__dict__, indent=2))
    else:
        console().print(
            f"uploaded {result.uri} ({result.bytes:,} bytes, {result.parts} part(s)); "
            f"S3 checksum SHA256 {result.checksum_sha256} verified"
        )
    return 0
