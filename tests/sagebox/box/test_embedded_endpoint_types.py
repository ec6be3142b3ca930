"""The embedded SageMaker's endpoint configs for the new endpoint types, in process (moto's backends under mock_aws,
the box's patches applied): shadow variants kept (from the API and from templates), SageMaker's refusals as
ValidationErrors, and what the control plane reads from them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sagebox.box.specs import AsyncConfig, read_endpoints

ACCOUNT, REGION = "123456789012", "us-east-1"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/SageboxExecution"
IMAGE = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/sagebox-serving:test"


@pytest.fixture
def sagemaker() -> Iterator[Any]:
    from moto import mock_aws

    from infra.catalog import instances
    from sagebox.box.embedded_aws import sagemaker as patch

    patch.accept_instance_types(instances())
    patch.endpoint_lifecycle()
    patch.omit_empty_objects()
    patch.capture_summary()
    patch.endpoint_config_features()
    with mock_aws():
        client = boto3.client(
            "sagemaker", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        for name in ("prod", "candidate"):
            client.create_model(
                ModelName=name,
                ExecutionRoleArn=ROLE,
                PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://m/{name}"},
            )
        yield client


def variant(name: str, model: str = "prod", **extra: Any) -> dict[str, Any]:
    return {
        "VariantName": name,
        "ModelName": model,
        "InstanceType": "ml.c6i.xlarge",
        "InitialInstanceCount": 1,
        **extra,
    }


SERVERLESS = {
    "VariantName": "AllTraffic",
    "ModelName": "prod",
    "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 4},
}
ASYNC = {"OutputConfig": {"S3OutputPath": "s3://results/out", "S3FailurePath": "s3://results/failed"}}


def backend() -> Any:
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[ACCOUNT][REGION]


def test_shadow_variants_are_kept_and_read_by_the_control_plane(sagemaker: Any) -> None:
    sagemaker.create_endpoint_config(
        EndpointConfigName="with-shadow",
        ProductionVariants=[variant("prod", InitialVariantWeight=1.0)],
        ShadowProductionVariants=[variant("candidate", "candidate", InitialVariantWeight=0.5)],
    )
    described = sagemaker.describe_endpoint_config(EndpointConfigName="with-shadow")
    assert [v["VariantName"] for v in described["ShadowProductionVariants"]] == ["candidate"]
    sagemaker.create_endpoint(EndpointName="ep", EndpointConfigName="with-shadow")
    spec = read_endpoints(backend())["ep"]
    assert not isinstance(spec, Exception)
    assert [(v.name, v.shadow, v.weight) for v in spec.variants] == [("prod", False, 1.0), ("candidate", True, 0.5)]
    assert [v.name for v in spec.production] == ["prod"] and [v.name for v in spec.shadows] == ["candidate"]


def test_serverless_and_async_configs_are_read_by_the_control_plane(sagemaker: Any) -> None:
    sagemaker.create_endpoint_config(EndpointConfigName="sl", ProductionVariants=[SERVERLESS])
    sagemaker.create_endpoint_config(
        EndpointConfigName="aq", ProductionVariants=[variant("AllTraffic")], AsyncInferenceConfig=ASYNC
    )
    sagemaker.create_endpoint(EndpointName="sl", EndpointConfigName="sl")
    sagemaker.create_endpoint(EndpointName="aq", EndpointConfigName="aq")
    specs = read_endpoints(backend())
    [sl] = specs["sl"].variants  # type: ignore[union-attr]
    assert sl.serverless is not None and (sl.serverless.memory_mb, sl.serverless.max_concurrency) == (2048, 4)
    assert specs["aq"].async_config == AsyncConfig("s3://results/out", "s3://results/failed")  # type: ignore[union-attr]
    described = sagemaker.describe_endpoint(EndpointName="sl")
    assert described["ProductionVariants"][0]["CurrentServerlessConfig"]["MaxConcurrency"] == 4


def test_describe_endpoint_answers_the_capture_summary_the_sdk_reads(sagemaker: Any) -> None:
    from sagemaker.core.resources import Endpoint

    sagemaker.create_endpoint_config(
        EndpointConfigName="captured",
        ProductionVariants=[variant("AllTraffic")],
        DataCaptureConfig={
            "EnableCapture": True,
            "InitialSamplingPercentage": 20,
            "DestinationS3Uri": "s3://c/capture",
            "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
            "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
        },
    )
    sagemaker.create_endpoint(EndpointName="captured", EndpointConfigName="captured")
    assert sagemaker.describe_endpoint(EndpointName="captured")["DataCaptureConfig"] == {
        "EnableCapture": True,
        "CaptureStatus": "Started",
        "CurrentSamplingPercentage": 20,
        "DestinationS3Uri": "s3://c/capture",
        "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
    }
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    endpoint = Endpoint.get("captured", session=session, region=REGION)  # pydantic-checked against SageMaker's shape
    assert endpoint.data_capture_config.current_sampling_percentage == 20
    assert "DataCaptureConfig" in sagemaker.describe_endpoint_config(EndpointConfigName="captured")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {
                "ProductionVariants": [variant("a"), variant("b")],
                "ShadowProductionVariants": [variant("s", "candidate")],
            },
            "exactly one production variant and one shadow variant",
        ),
        (
            {
                "ProductionVariants": [variant("a")],
                "ShadowProductionVariants": [variant("s", "candidate")],
                "AsyncInferenceConfig": ASYNC,
            },
            "not supported for asynchronous inference endpoints",
        ),
        (
            {"ProductionVariants": [SERVERLESS], "ShadowProductionVariants": [variant("s", "candidate")]},
            "not supported for serverless endpoints",
        ),
        (
            {
                "ProductionVariants": [
                    {**SERVERLESS, "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 201}}
                ]
            },
            "Value '201' at 'MaxConcurrency'",
        ),
        ({"ProductionVariants": [{**SERVERLESS, "InstanceType": "ml.c6i.xlarge"}]}, "a serverless variant has neither"),
        (
            {"ProductionVariants": [SERVERLESS, {**SERVERLESS, "VariantName": "other"}]},
            "one production variant only",
        ),
        (
            {
                "ProductionVariants": [SERVERLESS],
                "DataCaptureConfig": {
                    "EnableCapture": True,
                    "InitialSamplingPercentage": 10,
                    "DestinationS3Uri": "s3://c/d",
                    "CaptureOptions": [{"CaptureMode": "Input"}],
                },
            },
            "Data capture is not supported for serverless endpoints",
        ),
        ({"ProductionVariants": [SERVERLESS], "AsyncInferenceConfig": ASYNC}, "not supported for serverless"),
        (
            {"ProductionVariants": [variant("a")], "AsyncInferenceConfig": {"OutputConfig": {}}},
            "must name an S3OutputPath",
        ),
        (
            {"ProductionVariants": [variant("a")], "ShadowProductionVariants": [variant("s", "missing")]},
            "Could not find model",
        ),
    ],
)
def test_configs_sagemaker_refuses_are_validation_errors(sagemaker: Any, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientError) as caught:
        sagemaker.create_endpoint_config(EndpointConfigName="refused", **fields)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert message in caught.value.response["Error"]["Message"]


def test_templates_keep_their_shadow_variants(sagemaker: Any) -> None:
    template = {
        "Resources": {
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [variant("prod")],
                    "ShadowProductionVariants": [variant("candidate", "candidate", InitialVariantWeight=0.25)],
                },
            }
        }
    }
    cloudformation = boto3.client(
        "cloudformation", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    cloudformation.create_stack(StackName="shadow", TemplateBody=json.dumps(template))
    [config] = [c for c in backend().endpoint_configs.values()]
    described = sagemaker.describe_endpoint_config(EndpointConfigName=config.endpoint_config_name)
    assert [(v["VariantName"], v["InitialVariantWeight"]) for v in described["ShadowProductionVariants"]] == [
        ("candidate", 0.25)
    ]


def test_target_tracking_on_an_async_backlog_scales_the_variant_out(sagemaker: Any) -> None:
    """A CustomizedMetricSpecification on ApproximateBacklogSizePerInstance (AWS's async autoscaling example) is run
    by the box's autoscaler like the predefined invocations metric: 3 minutes above the target scale out."""
    import datetime
    import math
    import time

    from sagebox.box.embedded_aws import autoscaling, cloudwatch
    from sagebox.box.embedded_aws.autoscaling import Autoscaler, tracked_metric

    cloudwatch.apply()
    autoscaling.apply()
    sagemaker.create_endpoint_config(
        EndpointConfigName="aq", ProductionVariants=[variant("AllTraffic")], AsyncInferenceConfig=ASYNC
    )
    sagemaker.create_endpoint(EndpointName="aq", EndpointConfigName="aq")
    endpoint = backend().endpoints["aq"]
    endpoint.endpoint_status = "InService"
    clients = {
        name: boto3.client(name, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
        for name in ("application-autoscaling", "cloudwatch")
    }
    target = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/aq/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    clients["application-autoscaling"].register_scalable_target(**target, MinCapacity=1, MaxCapacity=3)
    custom = {
        "MetricName": "ApproximateBacklogSizePerInstance",
        "Namespace": "AWS/SageMaker",
        "Dimensions": [{"Name": "EndpointName", "Value": "aq"}],
        "Statistic": "Average",
    }
    clients["application-autoscaling"].put_scaling_policy(
        PolicyName="aq-backlog",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "CustomizedMetricSpecification": custom},
        **target,
    )
    assert tracked_metric({"CustomizedMetricSpecification": custom}, "aq", "AllTraffic") == (
        "AWS/SageMaker",
        "ApproximateBacklogSizePerInstance",
        [{"Name": "EndpointName", "Value": "aq"}],
        "Average",
    )
    scale, minute = 0.01, 0.6  # a box minute lasts 0.6 s
    start = math.floor(time.time() / minute) * minute - 20 * minute  # in the past: CloudWatch takes it
    scaler = Autoscaler(ACCOUNT, REGION, backend, scale)
    scaler.tick(start)  # the policy starts watching
    samples = [start + 0.05 + 0.2 * i for i in range(12)]  # four box minutes of a backlog of 12 per instance
    clients["cloudwatch"].put_metric_data(
        Namespace="AWS/SageMaker",
        MetricData=[
            {
                "MetricName": "ApproximateBacklogSizePerInstance",
                "Dimensions": [{"Name": "EndpointName", "Value": "aq"}],
                "Timestamp": datetime.datetime.fromtimestamp(at, datetime.UTC),
                "Value": 12.0,
            }
            for at in samples
        ],
    )
    scaler.tick(start + 4 * minute)
    [summary] = endpoint.production_variants
    assert (summary["DesiredInstanceCount"], endpoint.endpoint_status) == (3, "Updating")  # ceil(1 x 12 / 5), max 3
    assert [(a.old, a.new) for a in scaler.activities] == [(1, 3)]
