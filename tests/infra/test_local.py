"""infra.local: bootstrapless templates deployed into a moto server, endpoints seen by SageMaker's API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from infra.errors import DeployError
from infra.local import deploy, deployment_order, destroy, endpoint_names, synth_templates
from infra.targets import parse_targets
from tests.infra.conftest import ALL_TARGETS, IMAGE_URI, client

# moto skips these resource types (alarms, autoscaling, bucket policies): the template tests cover them.
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning")
MODEL_URLS = {name: f"s3://sagebox-models/{name}/model.tar.gz" for name in ALL_TARGETS}


@pytest.fixture(scope="module")
def local_templates() -> dict[str, dict[str, Any]]:
    return synth_templates(None, IMAGE_URI, MODEL_URLS, cfn_validate=True)


@pytest.fixture(scope="module")
def deployed(moto_url: str, local_templates: dict[str, dict[str, Any]]) -> Iterator[dict[str, str]]:
    cloudformation = client("cloudformation", moto_url)
    names = deploy(cloudformation, local_templates, poll_s=0.05)
    yield names
    destroy(cloudformation, local_templates, poll_s=0.05)


def test_local_templates_need_no_bootstrap_and_no_assets(local_templates: dict[str, dict[str, Any]]) -> None:
    assert list(local_templates) == ["sagebox-artifacts", *(f"sagebox-{n}" for n in ALL_TARGETS)]
    text = json.dumps(local_templates)
    assert "BootstrapVersion" not in text and "cdk-hnb659fds" not in text
    model = local_templates["sagebox-c5-fp32"]["Resources"]["Model"]["Properties"]["PrimaryContainer"]
    assert (model["Image"], model["ModelDataUrl"]) == (IMAGE_URI, MODEL_URLS["c5-fp32"])


def test_every_endpoint_stack_is_created_and_in_service(moto_url: str, deployed: dict[str, str]) -> None:
    sagemaker = client("sagemaker", moto_url)
    assert set(deployed) == set(ALL_TARGETS)
    instance_types = {}
    for target, endpoint_name in deployed.items():
        endpoint = sagemaker.describe_endpoint(EndpointName=endpoint_name)
        assert endpoint["EndpointStatus"] == "InService"
        config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
        [variant] = config["ProductionVariants"]
        instance_types[target] = variant["InstanceType"]
        model = sagemaker.describe_model(ModelName=variant["ModelName"])
        assert model["PrimaryContainer"]["Image"] == IMAGE_URI
        assert model["PrimaryContainer"]["ModelDataUrl"] == MODEL_URLS[target]
        assert model["PrimaryContainer"]["Environment"]["SAGEMAKER_MODEL_SERVER_WORKERS"] == "2"
        assert ("KmsKeyId" in config) == (target != "trn1-neuron")
    assert instance_types == {
        "c5-fp32": "ml.c5.2xlarge",
        "c6i-fp32": "ml.c6i.2xlarge",
        "c6i-int8": "ml.c6i.2xlarge",
        "inf2-neuron": "ml.inf2.xlarge",
        "trn1-neuron": "ml.trn1.2xlarge",
    }


def test_artifacts_exist_under_their_fixed_names(moto_url: str, deployed: dict[str, str]) -> None:
    assert deployed
    s3 = client("s3", moto_url)
    encryption = s3.get_bucket_encryption(Bucket="sagebox-artifacts-123456789012-us-east-1")
    [rule] = encryption["ServerSideEncryptionConfiguration"]["Rules"]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    [repository] = client("ecr", moto_url).describe_repositories(repositoryNames=["sagebox-serving"])["repositories"]
    assert repository["imageTagMutability"] == "IMMUTABLE"  # (moto drops scan-on-push: see the template tests)


def test_redeploying_unchanged_stacks_is_a_no_op(
    moto_url: str, local_templates: dict[str, dict[str, Any]], deployed: dict[str, str]
) -> None:
    cloudformation = client("cloudformation", moto_url)
    assert deploy(cloudformation, local_templates, poll_s=0.05) == deployed
    assert endpoint_names(cloudformation, list(local_templates)) == deployed


def test_destroy_removes_the_endpoints(moto_url: str) -> None:
    cloudformation = client("cloudformation", moto_url)
    sagemaker = client("sagemaker", moto_url)
    templates = synth_templates(
        parse_targets(
            {
                "targets": [
                    {
                        "name": "solo",
                        "instance_type": "ml.inf2.xlarge",
                        "variant": "neuron",
                        "model_data": "s3://solo-models/model.tar.gz",
                    }
                ]
            }
        ),
        IMAGE_URI,
        {},
        prefix="solo",
    )
    assert list(templates) == ["solo-artifacts", "solo-solo"]
    names = deploy(cloudformation, templates, poll_s=0.05)
    assert sagemaker.describe_endpoint(EndpointName=names["solo"])["EndpointStatus"] == "InService"
    destroy(cloudformation, list(templates), poll_s=0.05)
    with pytest.raises(ClientError, match="Could not find endpoint"):
        sagemaker.describe_endpoint(EndpointName=names["solo"])
    stacks = {s["StackName"] for s in cloudformation.describe_stacks()["Stacks"]}
    assert not stacks & set(templates)
    destroy(cloudformation, list(templates), poll_s=0.05)  # already gone: nothing to do


def test_a_failing_stack_raises_one_line(moto_url: str, local_templates: dict[str, dict[str, Any]]) -> None:
    """An endpoint stack deployed before its artifacts stack: CloudFormation finds no key export."""
    orphan = json.loads(json.dumps(local_templates["sagebox-c5-fp32"]).replace("sagebox-artifacts:", "gone-artifacts:"))
    cloudformation = client("cloudformation", moto_url)
    with pytest.raises(DeployError) as caught:
        deploy(cloudformation, {"orphan": orphan}, poll_s=0.05)
    message = str(caught.value)
    assert message.startswith("stack orphan: ValidationError: No export named gone-artifacts:") and "\n" not in message
    # moto keeps the failed stack but cannot describe it (it re-resolves the import): delete it directly.
    cloudformation.delete_stack(StackName="orphan")
    destroy(cloudformation, ["orphan"], poll_s=0.05)


def test_deployment_order_follows_exports() -> None:
    exporter = {"Outputs": {"K": {"Value": "v", "Export": {"Name": "a:K"}}}}
    importer = {"Resources": {"R": {"Properties": {"Arn": {"Fn::ImportValue": "a:K"}}}}}
    assert deployment_order({"b": importer, "a": exporter, "c": {}}) == ["a", "b", "c"]
    cycle = {
        "x": {"Outputs": {"K": {"Export": {"Name": "x:K"}}}, "R": {"Fn::ImportValue": "y:K"}},
        "y": {"Outputs": {"K": {"Export": {"Name": "y:K"}}}, "R": {"Fn::ImportValue": "x:K"}},
    }
    with pytest.raises(DeployError, match="import each other's exports: x, y"):
        deployment_order(cycle)


class ScriptedCloudFormation:
    """Real CloudFormation's slow and failing paths, which moto never takes (its stacks complete at once).

    Each stack walks through `script[name]` one status per describe call, then stays on the last status.
    """

    def __init__(self, script: dict[str, list[str]], events: list[dict[str, str]] | None = None) -> None:
        self.script = script
        self.events = events or []
        self.calls: list[tuple[str, str]] = []
        self.statuses: dict[str, list[str]] = {}

    def describe_stacks(self, StackName: str) -> dict[str, Any]:
        statuses = self.statuses.get(StackName)
        if not statuses:
            raise ClientError({"Error": {"Code": "ValidationError", "Message": "does not exist"}}, "DescribeStacks")
        status = statuses.pop(0) if len(statuses) > 1 else statuses[0]
        if status == "DELETE_COMPLETE":
            del self.statuses[StackName]
        return {"Stacks": [{"StackStatus": status, "Outputs": []}]}

    def create_stack(self, StackName: str, **_: Any) -> None:
        self.calls.append(("create", StackName))
        self.statuses[StackName] = list(self.script[StackName])

    def delete_stack(self, StackName: str) -> None:
        self.calls.append(("delete", StackName))
        self.statuses[StackName] = ["DELETE_IN_PROGRESS", "DELETE_COMPLETE"]

    def describe_stack_events(self, StackName: str) -> dict[str, Any]:
        return {"StackEvents": self.events}


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def test_waiting_gives_up_after_the_timeout() -> None:
    clock = FakeClock()
    cloudformation = ScriptedCloudFormation({"s": ["CREATE_IN_PROGRESS"]})
    with pytest.raises(DeployError, match="stack s still CREATE_IN_PROGRESS after 30 s"):
        deploy(cloudformation, {"s": {}}, timeout_s=30, poll_s=10, sleep=clock.sleep, clock=clock)
    assert clock.now == 30


def test_a_rolled_back_create_reports_the_first_failed_resource() -> None:
    events = [  # newest first, as CloudFormation lists them
        {"LogicalResourceId": "s", "ResourceStatus": "ROLLBACK_COMPLETE"},
        {
            "LogicalResourceId": "Endpoint",
            "ResourceStatus": "CREATE_FAILED",
            "ResourceStatusReason": "Cancelled",
        },
        {
            "LogicalResourceId": "EndpointConfig",
            "ResourceStatus": "CREATE_FAILED",
            "ResourceStatusReason": "Service limit 'ml.inf2.xlarge for endpoint usage' is 0",
        },
    ]
    cloudformation = ScriptedCloudFormation({"s": ["CREATE_IN_PROGRESS", "ROLLBACK_COMPLETE"]}, events)
    clock = FakeClock()
    with pytest.raises(DeployError) as caught:
        deploy(cloudformation, {"s": {}}, poll_s=1, sleep=clock.sleep, clock=clock)
    assert str(caught.value) == (
        "stack s ended ROLLBACK_COMPLETE: EndpointConfig: Service limit 'ml.inf2.xlarge for endpoint usage' is 0"
    )
    # The next deploy must delete the rolled-back stack before creating it again.
    cloudformation.script["s"] = ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert deploy(cloudformation, {"s": {}}, poll_s=1, sleep=clock.sleep, clock=clock) == {}
    assert cloudformation.calls == [("create", "s"), ("delete", "s"), ("create", "s")]
