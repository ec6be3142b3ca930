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
    local: bool = False  # the embedded AWS: fixed dummy credentials, never the user's real ones

    @classmethod
    def for_box(cls, region: str, aws_url: str, gateway_url: str) -> AwsOptions:
        """The local box: every service at the embedded moto server, InvokeEndpoint at the runtime gateway."""
        return cls(region=region, endpoint_url=aws_url, runtime_endpoint_url=gateway_url, local=True)

    @classmethod
    def from_env(cls, **overrides: str | None) -> AwsOptions:
        values = {
            "region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
            "profile": os.environ.get("AWS_PROFILE"),
            "endpoint_url": os.environ.get("AWS_ENDPOINT_URL"),
            "runtime_endpoint_url": os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(
            region=values["region"],
            profile=values["profile"],
            endpoint_url=values["endpoint_url"],
            runtime_endpoint_url=values["runtime_endpoint_url"],
        )


LOCAL_KEY = "testing"  # what moto accepts; anything else would be sent to a real account


def session(options: AwsOptions) -> boto3.session.Session:
    region = options.region or "us-east-1"
    if options.local:
        return boto3.session.Session(aws_access_key_id=LOCAL_KEY, aws_secret_access_key=LOCAL_KEY, region_name=region)
    return boto3.session.Session(profile_name=options.profile, region_name=region)


def client(sess: boto3.session.Session, service: str, options: AwsOptions, **config: Any) -> Any:
    endpoint = options.endpoint_url
    if service == "sagemaker-runtime" and options.runtime_endpoint_url:
        endpoint = options.runtime_endpoint_url
    return sess.client(
        service,
        endpoint_url=endpoint,
        config=botocore.config.Config(retries={"max_attempts": 3, "mode": "standard"}, **config),
    )
