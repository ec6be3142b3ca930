"""A small notebook API on the SageMaker Python SDK (v3's `sagemaker.core` resources).

    from sagebox.notebook import deploy, box_session
    predictor = deploy("s3://bucket/int8/model.tar.gz", image_uri, role_arn, "ml.c6i.2xlarge",
                       session=boto3.Session(profile_name="ml"))           # a real account
    predictor = deploy(..., session=box_session())                          # the local box (`sagebox up`)
    predictor.predict({"question": "...", "context": "..."})               # -> {"answer", "score", "start", "end"}
    predictor.predict({"inputs": ["a text"]})                               # other tasks: what their pipeline answers
    predictor.delete()

The SDK is imported inside these functions only: `sagebox` CLI start-up never pays its ~2 s import.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import boto3

from sagebox.errors import SageboxError


class EndpointSession(boto3.session.Session):
    """A boto3 Session whose clients go to per-service endpoint URLs (how the SDK reaches the local box)."""

    def __init__(self, endpoints: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._endpoints = dict(endpoints)

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("endpoint_url") is None and service_name in self._endpoints:
            kwargs["endpoint_url"] = self._endpoints[service_name]
        return super().client(service_name, *args, **kwargs)


def box_session(
    aws_url: str | None = None, runtime_url: str | None = None, region: str | None = None
) -> EndpointSession:
    """A session for the local box: AWS calls to the embedded moto server, InvokeEndpoint to the gateway."""
    if aws_url is None or runtime_url is None:
        from sagebox.box.state import load_state
        from sagebox.paths import state_dir

        state = load_state(state_dir())
        if state is None:
            raise SageboxError("no local box is running: start one with `sagebox up`")
        aws_url, runtime_url, region = state.aws_url, state.gateway_url, region or state.region
    services = ("sagemaker", "s3", "iam", "sts", "logs", "cloudformation")
    session = EndpointSession(
        {**{name: aws_url for name in services}, "sagemaker-runtime": runtime_url},
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=region or "us-east-1",
    )
    return session


class Predictor:
    """Speaks the serving container's JSON: a dict (or list of dicts) in, answers out."""

    def __init__(self, endpoint: Any, session: boto3.session.Session, region: str) -> None:
        self.endpoint = endpoint
        self.session = session
        self.region = region

    @property
    def endpoint_name(self) -> str:
        return str(self.endpoint.endpoint_name)

    def predict(self, payload: dict[str, Any] | list[dict[str, Any]], custom_attributes: str | None = None) -> Any:
        extra = {"custom_attributes": custom_attributes} if custom_attributes else {}
        output = self.endpoint.invoke(
            body=json.dumps(payload), content_type="application/json", accept="application/json", **extra
        )
        body = output.body.read() if hasattr(output.body, "read") else output.body
        return json.loads(body)

    def delete(self) -> None:
        """Delete the endpoint, its config and its model (what `deploy` created)."""
        from sagemaker.core.resources import EndpointConfig, Model

        config_name = self.endpoint.endpoint_config_name
        config = EndpointConfig.get(config_name, session=self.session, region=self.region)
        model_names = [v.model_name for v in config.production_variants or []]
        self.endpoint.delete()
        config.delete()
        for name in model_names:
            Model.get(name, session=self.session, region=self.region).delete()


def deploy(
    model_data_url: str,
    image_uri: str,
    role_arn: str,
    instance_type: str,
    *,
    session: boto3.session.Session,
    name: str | None = None,
    instance_count: int = 1,
    environment: dict[str, str] | None = None,
    wait_timeout_s: int = 1800,
) -> Predictor:
    """Create model, endpoint config and endpoint for a packaged artifact; wait for InService."""
    if not model_data_url.startswith("s3://"):
        raise SageboxError(f"model data must be an s3:// URI of a model.tar.gz, got {model_data_url!r}")
    from infra.catalog import instance

    spec = instance(instance_type)  # unknown instance types fail here, with the known ones listed
    region = session.region_name or "us-east-1"
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant

    name = name or f"sagebox-{spec.family}-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
    env = {"SAGEMAKER_MODEL_SERVER_WORKERS": "1", **(environment or {})}
    model = Model.create(
        model_name=name,
        primary_container=ContainerDefinition(image=image_uri, model_data_url=model_data_url, environment=env),
        execution_role_arn=role_arn,
        session=session,
        region=region,
    )
    config = EndpointConfig.create(
        endpoint_config_name=name,
        production_variants=[
            ProductionVariant(
                variant_name="AllTraffic",
                model_name=model.model_name,
                initial_instance_count=instance_count,
                instance_type=instance_type,
            )
        ],
        session=session,
        region=region,
    )
    endpoint = Endpoint.create(
        endpoint_name=name, endpoint_config_name=config.endpoint_config_name, session=session, region=region
    )
    endpoint.wait_for_status("InService", poll=5, timeout=wait_timeout_s)
    return Predictor(endpoint, session, region)
