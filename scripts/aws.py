"""boto3 sessions and clients, built from explicit options; the one place the CLI and scripts make them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.config


@dataclass(frozen=True)
class AwsOptions:
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None  # every service (e.g. the embedded moto server)
    runtime_endpoint_url: str | None = None  # sagemaker-runtime only (e.g. the local runtime gateway)

    @classmethod
    def from_env(cls, **overrides: str | None) -> AwsOptions:
        values = {
            "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
            "profile": os.environ.get("AWS_PROFILE"),
            "endpoint_url": os.environ.get("AWS_ENDPOINT_URL"),
            "runtime_endpoint_url": os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def session(options: AwsOptions) -> boto3.session.Session:
    return boto3.session.Session(profile_name=options.profile, region_name=options.region or "us-east-1")


def client(sess: boto3.session.Session, service: str, options: AwsOptions, **config: Any) -> Any:
    endpoint = options.endpoint_url
    if service == "sagemaker-runtime" and options.runtime_endpoint_url:
        endpoint = options.runtime_endpoint_url
    return sess.client(
        service,
        endpoint_url=endpoint,
        config=botocore.config.Config(retries={"max_attempts": 3, "mode": "standard"}, **config),
    )
