"""The embedded AWS driven through AWS's own APIs (boto3), as any client would: the control plane serves what
SageMaker's API describes, and CloudFormation change sets deploy what the CDK CLI sends."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError, WaiterError

from sagebox.box.reconciler import load_fleet
from tests.conftest import EmbeddedAws

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]

ROLE = "arn:aws:iam::123456789012:role/SageboxExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:test"
CONTEXT = "The Amazon rainforest covers most of the Amazon basin of South America."
FAST = {"Delay": 1, "MaxAttempts": 180}


def upload(box: EmbeddedAws, key: str, data: bytes) -> str:
    s3 = box.client("s3")
    with contextlib.suppress(ClientError):
        s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key=key, Body=data)
    return f"s3://models/{key}"


def tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def create(box: EmbeddedAws, name: str, model_data: str, config: str | None = None) -> None:
    sagemaker = box.client("sagemaker")
    config = config or name
    sagemaker.create_model(
        ModelName=config,
        ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": model_data, "Environment": {"SAGEBOX_LOG_LEVEL": "info"}},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=config,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": config,
                "InstanceType": "ml.c6i.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    if config == name:
        sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=config)


def ask(box: EmbeddedAws, name: str) -> dict[str, Any]:
    response = box.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=name,
        Body=json.dumps({"question": "Which basin?", "context": CONTEXT}),
        ContentType="application/json",
    )
    assert response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-invoked-production-variant"] == "AllTraffic"
    return dict(json.loads(response["Body"].read()))


def pids(box: EmbeddedAws, name: str) -> list[int]:
    variants = load_fleet(box.state_dir).get(name, {}).get("variants", [])
    return [int(i["pid"]) for v in variants for i in v["instances"]]


def exits(pid: int, polls: int = 400) -> bool:
    """Whether the process exits within `polls` checks (the control plane stops instances in the background)."""
    from sagebox.box import processes

    for _ in range(polls):
        if not processes.alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_plain_boto3_endpoint_serves_only_once_in_service_and_stops_on_delete(
    embedded_aws: EmbeddedAws, tiny_model_tarball: Path
) -> None:
    from sagebox.box import processes

    sagemaker = embedded_aws.client("sagemaker")
    create(embedded_aws, "plain", upload(embedded_aws, "plain/model.tar.gz", tiny_model_tarball.read_bytes()))
    assert sagemaker.describe_endpoint(EndpointName="plain")["EndpointStatus"] in ("Creating", "InService")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="plain", WaiterConfig=FAST)
    described = sagemaker.describe_endpoint(EndpointName="plain")
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1
    assert described["ProductionVariants"][0]["DeployedImages"][0]["SpecifiedImage"] == IMAGE
    answer = ask(embedded_aws, "plain")
    assert CONTEXT[answer["start"] : answer["end"]] == answer["answer"]
    [pid] = pids(embedded_aws, "plain")
    assert processes.alive(pid)

    with pytest.raises(ClientError, match="Cannot create already existing endpoint"):
        sagemaker.create_endpoint(EndpointName="plain", EndpointConfigName="plain")

    sagemaker.delete_endpoint(EndpointName="plain")
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName="plain", WaiterConfig=FAST)
    with pytest.raises(ClientError) as gone:
        ask(embedded_aws, "plain")
    assert gone.value.response["Error"]["Code"] == "ValidationError"
    assert exits(pid)  # SIGTERM, drain, exit


def test_a_model_that_cannot_load_fails_the_endpoint_with_a_readable_reason(embedded_aws: EmbeddedAws) -> None:
    sagemaker = embedded_aws.client("sagemaker")
    broken = tarball({"manifest.json": b'{"schema_version": 1}'})
    create(embedded_aws, "broken", upload(embedded_aws, "broken/model.tar.gz", broken))
    with pytest.raises(WaiterError):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="broken", WaiterConfig=FAST)
    described = sagemaker.describe_endpoint(EndpointName="broken")
    assert described["EndpointStatus"] == "Failed"
    reason = described["FailureReason"]
    assert "did not pass the ping health check" in reason and "\n" not in reason
    # The detail comes from the container's log: clients of the container only get a short reason.
    assert "model refused:" in reason and "manifest.json is invalid" in reason
    with pytest.raises(ClientError):
        ask(embedded_aws, "broken")

    not_a_tarball = upload(embedded_aws, "junk/model.tar.gz", b"not a tarball")
    create(embedded_aws, "junk", not_a_tarball)
    with pytest.raises(WaiterError):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="junk", WaiterConfig=FAST)
    assert "Failed to extract model data archive" in sagemaker.describe_endpoint(EndpointName="junk")["FailureReason"]


def test_update_endpoint_switches_over_once_the_new_config_is_healthy(
    embedded_aws: EmbeddedAws, tiny_model_tarball: Path
) -> None:

    sagemaker = embedded_aws.client("sagemaker")
    model = upload(embedded_aws, "updated/model.tar.gz", tiny_model_tarball.read_bytes())
    create(embedded_aws, "updated", model)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="updated", WaiterConfig=FAST)
    [first] = pids(embedded_aws, "updated")

    create(embedded_aws, "updated", upload(embedded_aws, "bad/model.tar.gz", b"junk"), config="updated-bad")
    sagemaker.update_endpoint(EndpointName="updated", EndpointConfigName="updated-bad")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="updated", WaiterConfig=FAST)
    after_bad = sagemaker.describe_endpoint(EndpointName="updated")
    # A failed update leaves the endpoint serving its previous config, with the reason recorded.
    assert after_bad["EndpointConfigName"] == "updated" and "Failed to extract" in after_bad["FailureReason"]
    assert pids(embedded_aws, "updated") == [first] and ask(embedded_aws, "updated")["answer"]

    create(embedded_aws, "updated", model, config="updated-v2")
    sagemaker.update_endpoint(EndpointName="updated", EndpointConfigName="updated-v2")
    assert sagemaker.describe_endpoint(EndpointName="updated")["EndpointStatus"] in ("Updating", "InService")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="updated", WaiterConfig=FAST)
    assert sagemaker.describe_endpoint(EndpointName="updated")["EndpointConfigName"] == "updated-v2"
    [second] = pids(embedded_aws, "updated")
    assert second != first and ask(embedded_aws, "updated")["answer"]
    assert exits(first)  # the old instance stops once the new one serves
    sagemaker.delete_endpoint(EndpointName="updated")


EXPORTER = {
    "Resources": {
        "Key": {
            "Type": "AWS::KMS::Key",
            "Properties": {
                "KeyPolicy": {"Version": "2012-10-17", "Statement": []},
                "Tags": [{"Key": "sagebox:app", "Value": "test"}],
            },
        }
    },
    "Outputs": {"KeyArn": {"Value": {"Fn::GetAtt": ["Key", "Arn"]}, "Export": {"Name": "test-key-arn"}}},
}
IMPORTER = {
    "Resources": {
        "Param": {
            "Type": "AWS::SSM::Parameter",
            "Properties": {"Name": "imported", "Type": "String", "Value": {"Fn::ImportValue": "test-key-arn"}},
        }
    },
    "Outputs": {"Imported": {"Value": {"Fn::ImportValue": "test-key-arn"}}},
}


def change_set(cloudformation: Any, stack: str, template: dict[str, Any], kind: str = "CREATE") -> None:
    """What `cdk deploy` does: a change set of the same name for every stack, then its execution."""
    cloudformation.create_change_set(
        StackName=stack, ChangeSetName="cdk-deploy-change-set", TemplateBody=json.dumps(template), ChangeSetType=kind
    )
    cloudformation.get_waiter("change_set_create_complete").wait(
        StackName=stack, ChangeSetName="cdk-deploy-change-set", WaiterConfig={"Delay": 1}
    )
    cloudformation.execute_change_set(StackName=stack, ChangeSetName="cdk-deploy-change-set")


def test_change_sets_register_outputs_and_exports_and_resolve_imports(embedded_aws: EmbeddedAws) -> None:
    cloudformation = embedded_aws.client("cloudformation")
    change_set(cloudformation, "exporter", EXPORTER)
    change_set(cloudformation, "importer", IMPORTER)
    [exporter] = cloudformation.describe_stacks(StackName="exporter")["Stacks"]
    [importer] = cloudformation.describe_stacks(StackName="importer")["Stacks"]
    assert exporter["StackStatus"] == importer["StackStatus"] == "CREATE_COMPLETE"
    key_arn = {o["OutputKey"]: o["OutputValue"] for o in exporter["Outputs"]}["KeyArn"]
    assert key_arn.startswith("arn:aws:kms:us-east-1:123456789012:key/")
    assert {e["Name"]: e["Value"] for e in cloudformation.list_exports()["Exports"]}["test-key-arn"] == key_arn
    assert {o["OutputKey"]: o["OutputValue"] for o in importer["Outputs"]} == {"Imported": key_arn}
    kms = embedded_aws.client("kms")
    tags = kms.list_resource_tags(KeyId=key_arn.rsplit("/", 1)[1])["Tags"]
    assert {"TagKey": "sagebox:app", "TagValue": "test"} in tags  # CloudFormation's {Key, Value} tags work


def test_a_failing_change_set_rolls_the_stack_back_with_its_reason(embedded_aws: EmbeddedAws) -> None:
    cloudformation = embedded_aws.client("cloudformation")
    missing = {
        "Resources": {
            "Param": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": "doomed", "Type": "String", "Value": {"Fn::ImportValue": "no-such"}},
            }
        }
    }
    change_set(cloudformation, "doomed", missing)
    [stack] = cloudformation.describe_stacks(StackName="doomed")["Stacks"]
    assert stack["StackStatus"] == "ROLLBACK_COMPLETE"
    events = cloudformation.describe_stack_events(StackName="doomed")["StackEvents"]
    failed = [e for e in events if e["ResourceStatus"] == "CREATE_FAILED"]
    assert failed and "no-such" in failed[0]["ResourceStatusReason"]


def test_a_stack_whose_bucket_holds_objects_fails_to_delete_until_it_is_emptied(embedded_aws: EmbeddedAws) -> None:
    cloudformation, s3 = embedded_aws.client("cloudformation"), embedded_aws.client("s3")
    template = {
        "Resources": {
            "Data": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "kept-data"}},
            "Logs": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "kept-logs"}, "DeletionPolicy": "Retain"},
        }
    }
    change_set(cloudformation, "holds-data", template)
    s3.put_object(Bucket="kept-data", Key="captures/one.jsonl", Body=b"{}")
    s3.put_object(Bucket="kept-logs", Key="log", Body=b"x")  # retained: never blocks the delete

    cloudformation.delete_stack(StackName="holds-data")
    [stack] = cloudformation.describe_stacks(StackName="holds-data")["Stacks"]
    assert stack["StackStatus"] == "DELETE_FAILED"
    assert stack["StackStatusReason"] == "The following resource(s) failed to delete: [Data]. "
    events = cloudformation.describe_stack_events(StackName="holds-data")["StackEvents"]
    [failed] = [e for e in events if e["LogicalResourceId"] == "Data" and e["ResourceStatus"] == "DELETE_FAILED"]
    assert "BucketNotEmpty" in failed["ResourceStatusReason"]
    assert s3.get_object(Bucket="kept-data", Key="captures/one.jsonl")["Body"].read() == b"{}"  # nothing lost

    s3.delete_object(Bucket="kept-data", Key="captures/one.jsonl")
    cloudformation.delete_stack(StackName="holds-data")
    names = {b["Name"] for b in s3.list_buckets()["Buckets"]}
    assert "kept-data" not in names and "kept-logs" in names
    with pytest.raises(ClientError):
        cloudformation.describe_stacks(StackName="holds-data")


def test_a_stack_with_an_endpoint_completes_only_when_the_endpoint_serves(
    embedded_aws: EmbeddedAws, tiny_model_tarball: Path
) -> None:
    cloudformation = embedded_aws.client("cloudformation")
    model_data = upload(embedded_aws, "cfn/model.tar.gz", tiny_model_tarball.read_bytes())
    template = {
        "Resources": {
            "Model": {
                "Type": "AWS::SageMaker::Model",
                "Properties": {
                    "ExecutionRoleArn": ROLE,
                    "PrimaryContainer": {"Image": IMAGE, "ModelDataUrl": model_data},
                },
            },
            "Config": {
                "Type": "AWS::SageMaker::EndpointConfig",
                "Properties": {
                    "ProductionVariants": [
                        {
                            "VariantName": "AllTraffic",
                            "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                            "InstanceType": "ml.c6i.2xlarge",
                            "InitialInstanceCount": 1,
                            "InitialVariantWeight": 1.0,
                        }
                    ]
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": "from-a-template",
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                },
            },
        },
        "Outputs": {"EndpointName": {"Value": {"Fn::GetAtt": ["Endpoint", "EndpointName"]}}},
    }
    change_set(cloudformation, "with-endpoint", template)
    cloudformation.get_waiter("stack_create_complete").wait(StackName="with-endpoint", WaiterConfig={"Delay": 1})
    [stack] = cloudformation.describe_stacks(StackName="with-endpoint")["Stacks"]
    assert stack["Outputs"][0]["OutputValue"] == "from-a-template"  # the template's name, not a generated one
    status = embedded_aws.client("sagemaker").describe_endpoint(EndpointName="from-a-template")["EndpointStatus"]
    assert status == "InService" and ask(embedded_aws, "from-a-template")["answer"]
    cloudformation.delete_stack(StackName="with-endpoint")
