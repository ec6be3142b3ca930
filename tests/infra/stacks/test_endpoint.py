"""Template assertions on every endpoint stack of the default app (one session synth)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from infra.targets import load_targets
from tests.infra.conftest import ALL_TARGETS, Synthesized

TARGETS = {t.name: t for t in load_targets()}
INSTANCE_TYPES = {
    "c5-fp32": "ml.c5.2xlarge",
    "c6i-fp32": "ml.c6i.2xlarge",
    "c6i-int8": "ml.c6i.2xlarge",
    "inf2-neuron": "ml.inf2.xlarge",
    "trn1-neuron": "ml.trn1.2xlarge",
}
NEURON_BACKENDS = {"inf2-neuron": "neuron_emu", "trn1-neuron": "torch_neuronx"}
# The only actions that may name Resource "*": they support no resource-level permissions.
STAR_ACTIONS = {"cloudwatch:PutMetricData", "ecr:GetAuthorizationToken"}


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def one(template: dict[str, Any], kind: str) -> dict[str, Any]:
    [(_, resource)] = resources(template, kind).items()
    return resource["Properties"]


def flat(value: Any) -> str:
    """A CloudFormation value as one string (joins flattened, intrinsic objects as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(flat(part) for part in value["Fn::Join"][1])
    return json.dumps(value, sort_keys=True)


@pytest.fixture(params=ALL_TARGETS)
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def template(templates: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return templates[f"sagebox-{name}"]


def test_one_stack_per_target_plus_artifacts(templates: dict[str, dict[str, Any]]) -> None:
    assert set(templates) == {"sagebox-artifacts", *(f"sagebox-{n}" for n in ALL_TARGETS)}


def test_instance_type_and_variant(template: dict[str, Any], name: str) -> None:
    [variant] = one(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["InstanceType"] == INSTANCE_TYPES[name]
    assert variant["InitialInstanceCount"] == 1 and variant["VariantName"] == "AllTraffic"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == (900 if "neuron" in name else 300)
    assert variant["ModelName"] == {"Fn::GetAtt": ["Model", "ModelName"]}


def test_names_are_generated_except_the_endpoint(template: dict[str, Any], name: str) -> None:
    assert "ModelName" not in one(template, "AWS::SageMaker::Model")
    assert "EndpointConfigName" not in one(template, "AWS::SageMaker::EndpointConfig")
    assert one(template, "AWS::SageMaker::Endpoint")["EndpointName"] == f"sagebox-{name}"


def test_model_uses_the_built_image_and_the_model_asset(template: dict[str, Any]) -> None:
    model = one(template, "AWS::SageMaker::Model")
    assert model["EnableNetworkIsolation"] is True
    container = model["PrimaryContainer"]
    assert "cdk-hnb659fds-container-assets-" in container["Image"]["Fn::Sub"]
    assert container["ModelDataUrl"]["Fn::Sub"].startswith("s3://cdk-hnb659fds-assets-")
    assert container["Environment"]["SAGEMAKER_MODEL_SERVER_TIMEOUT"] == "60"
    assert model["ExecutionRoleArn"] == {"Fn::GetAtt": [next(iter(resources(template, "AWS::IAM::Role"))), "Arn"]}


def test_volume_encryption_where_the_instance_supports_it(template: dict[str, Any], name: str) -> None:
    config = one(template, "AWS::SageMaker::EndpointConfig")
    if name == "trn1-neuron":
        assert "KmsKeyId" not in config  # instance-store NVMe: SageMaker rejects a volume key
    else:
        assert "Fn::ImportValue" in config["KmsKeyId"]


def test_data_capture_only_where_configured(template: dict[str, Any], name: str) -> None:
    config = one(template, "AWS::SageMaker::EndpointConfig")
    if TARGETS[name].data_capture is None:
        assert "DataCaptureConfig" not in config
        return
    capture = config["DataCaptureConfig"]
    assert capture["EnableCapture"] is True and capture["InitialSamplingPercentage"] == 10
    bucket = 'sagebox-artifacts-{"Ref": "AWS::AccountId"}-{"Ref": "AWS::Region"}'
    assert flat(capture["DestinationS3Uri"]) == f"s3://{bucket}/data-capture/sagebox-{name}"
    assert capture["CaptureOptions"] == [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}]
    assert capture["KmsKeyId"] == config["KmsKeyId"]


def test_execution_role_is_least_privilege(template: dict[str, Any], name: str) -> None:
    [role] = [r["Properties"] for r in resources(template, "AWS::IAM::Role").values()]
    assert "ManagedPolicyArns" not in role
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}}
    ]
    assert not resources(template, "AWS::IAM::Policy") and not resources(template, "AWS::IAM::ManagedPolicy")
    statements = {s["Sid"]: s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]}
    assert all(s["Effect"] == "Allow" for s in statements.values())
    for statement in statements.values():
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert not any("*" in action for action in actions)
        if statement["Resource"] == "*":
            assert set(actions) <= STAR_ACTIONS, statement
    assert statements["PublishInstanceMetrics"]["Condition"] == {
        "StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}
    }
    # Exactly the one model object, and this endpoint's log group.
    model_object = flat(statements["ReadModelData"]["Resource"])
    assert model_object.startswith('arn:{"Ref": "AWS::Partition"}:s3:::') and model_object.endswith(".gz")
    assert "/" in model_object.split(":::", 1)[1]
    logs = [flat(r) for r in statements["WriteEndpointLogs"]["Resource"]]
    assert all(f":log-group:/aws/sagemaker/Endpoints/sagebox-{name}" in r for r in logs)
    assert statements["PullServingImage"]["Action"] == [
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
    ]
    assert "container-assets" in flat(statements["PullServingImage"]["Resource"])
    key_actions = statements["UseArtifactsKey"]["Action"]
    if TARGETS[name].data_capture:
        assert key_actions == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert flat(statements["WriteDataCapture"]["Resource"]).endswith(f"/data-capture/sagebox-{name}/*")
    else:
        assert key_actions == "kms:Decrypt" and "WriteDataCapture" not in statements


def test_alarms_watch_latency_p90_and_5xx(template: dict[str, Any], name: str) -> None:
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"] for a in resources(template, "AWS::CloudWatch::Alarm").values()
    }
    latency = alarms[f"sagebox-{name}-model-latency-p90"]
    errors = alarms[f"sagebox-{name}-5xx-errors"]
    assert len(alarms) == 2
    dims = [
        {"Name": "EndpointName", "Value": f"sagebox-{name}"},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
    assert latency["Dimensions"] == dims == errors["Dimensions"]
    assert (latency["Namespace"], latency["MetricName"], latency["ExtendedStatistic"]) == (
        "AWS/SageMaker",
        "ModelLatency",
        "p90",
    )
    assert latency["Threshold"] == TARGETS[name].alarms.latency_p90_ms * 1000  # microseconds
    assert latency["ComparisonOperator"] == "GreaterThanThreshold" and latency["EvaluationPeriods"] == 3
    assert (errors["MetricName"], errors["Statistic"], errors["Threshold"]) == (
        "Invocation5XXErrors",
        "Sum",
        1,
    )
    assert errors["ComparisonOperator"] == "GreaterThanOrEqualToThreshold" and errors["Period"] == 60


def test_blue_green_deployment_rolls_back_on_both_alarms(template: dict[str, Any], name: str) -> None:
    endpoint = template["Resources"]["Endpoint"]
    config = endpoint["Properties"]["DeploymentConfig"]
    policy = config["BlueGreenUpdatePolicy"]
    assert policy["TrafficRoutingConfiguration"] == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300}
    assert policy["TerminationWaitInSeconds"] == 120
    assert policy["MaximumExecutionTimeoutInSeconds"] >= 2 * 300 + 120
    alarm_names = {a["Properties"]["AlarmName"] for a in resources(template, "AWS::CloudWatch::Alarm").values()}
    assert {a["AlarmName"] for a in config["AutoRollbackConfiguration"]["Alarms"]} == alarm_names
    # The alarms exist before the endpoint that names them.
    assert set(endpoint["DependsOn"]) == set(resources(template, "AWS::CloudWatch::Alarm"))
    assert endpoint["Properties"]["RetainAllVariantProperties"] is True


def test_autoscaling_tracks_invocations_per_instance(template: dict[str, Any], name: str) -> None:
    scaling = TARGETS[name].autoscaling
    assert scaling is not None
    assertions = Template.from_json(template)
    assertions.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "MinCapacity": scaling.min_instances,
            "MaxCapacity": scaling.max_instances,
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "ServiceNamespace": "sagemaker",
            "ResourceId": {
                "Fn::Join": [
                    "",
                    ["endpoint/", {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, "/variant/AllTraffic"],
                ]
            },
            "RoleARN": Match.absent(),  # the service-linked role
        },
    )
    assertions.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": scaling.invocations_per_instance,
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                "ScaleInCooldown": 300,
                "ScaleOutCooldown": 60,
            },
        },
    )
    assertions.resource_count_is("AWS::IAM::Role", 1)


def test_dashboard_and_outputs(template: dict[str, Any], name: str) -> None:
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = flat(dashboard["Properties"]["DashboardBody"])
    for metric in (
        "Invocations",
        "Invocation5XXErrors",
        "ModelLatency",
        "CPUUtilization",
        "MemoryUtilization",
    ):
        assert f'"{metric}","EndpointName","sagebox-{name}"' in body
    assert f"alarm:sagebox-{name}-model-latency-p90" in body
    outputs = {k: v["Value"] for k, v in template["Outputs"].items()}
    assert outputs["EndpointName"] == {"Fn::GetAtt": ["Endpoint", "EndpointName"]}
    assert outputs["TargetName"] == name and outputs["InstanceType"] == INSTANCE_TYPES[name]
    assert outputs["ModelVariant"] == TARGETS[name].variant
    # Neuron stacks say what compiled their model (the session: inf2 emulated, allowed; trn1 torch_neuronx).
    assert outputs.get("NeuronBackend") == NEURON_BACKENDS.get(name)
    emulated = name in NEURON_BACKENDS and NEURON_BACKENDS[name] == "neuron_emu"
    assert template["Description"].endswith("(neuron_emu: emulated on the host CPU)") == emulated


def test_each_stack_builds_the_image_its_model_needs(synthesized: Synthesized, name: str) -> None:
    assets = json.loads((synthesized.outdir / f"sagebox-{name}.assets.json").read_text())
    [image] = assets["dockerImages"].values()
    assert image["source"]["platform"] == "linux/amd64"
    neuron_image = NEURON_BACKENDS.get(name) == "torch_neuronx"
    assert image["source"]["dockerFile"] == ("container/Dockerfile.neuron" if neuron_image else "container/Dockerfile")
    assert "dockerBuildArgs" not in image["source"]  # no base image set for either in the session
