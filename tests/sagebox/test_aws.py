"""Sessions and clients: the local box never uses a real account's credentials; real options come from env."""

from __future__ import annotations

import pytest

from sagebox import aws


def test_box_sessions_use_dummy_credentials_whatever_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAREALREALREAL")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "real-secret")
    options = aws.AwsOptions.for_box("eu-west-1", "http://localhost:5000", "http://localhost:6000")
    session = aws.session(options)
    credentials = session.get_credentials()
    assert credentials is not None and credentials.access_key == aws.LOCAL_KEY
    assert session.region_name == "eu-west-1"
    assert aws.client(session, "sagemaker", options).meta.endpoint_url == "http://localhost:5000"
    assert aws.client(session, "sagemaker-runtime", options).meta.endpoint_url == "http://localhost:6000"


def test_options_from_env_with_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "http://gateway")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    options = aws.AwsOptions.from_env(profile=None, region=None)
    assert (options.region, options.runtime_endpoint_url, options.local) == ("ap-south-1", "http://gateway", False)
    assert aws.AwsOptions.from_env(region="us-west-2").region == "us-west-2"
