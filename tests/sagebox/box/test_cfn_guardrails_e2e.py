"""An endpoint stack updated as `cdk deploy` updates it (change sets), in the scaled box: the template's alarms and
autoscaling resources exist, a new model reaches the endpoint through the replaced Model and EndpointConfig, an
update whose model answers 500s is rolled back by the endpoint's alarm and then by CloudFormation
(UPDATE_ROLLBACK_COMPLETE, the previous config still there and serving), and a good update completes and cleans up
the replaced config. Waits poll for states; nothing sleeps to order events."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.sagebox.box.conftest import ScaledBox
from tests.sagebox.box.test_guardrails_e2e import LATENCY_ALARM_US, Load

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

STACK, ENDPOINT = "cfn-guarded", "cfn-gr"
ROLE = "arn:aws:iam::123456789012:role/SageboxExecution"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:test"
DIMS = [{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": "AllTraffic"}]
ALARMS = [f"{ENDPOINT}-model-latency-p90", f"{ENDPOINT}-5xx-errors"]
TERMINAL = (
    "CREATE_COMPLETE",
    "UPDATE_COMPLETE",
    "UPDATE_ROLLBACK_COMPLETE",
    "UPDATE_ROLLBACK_FAILED",
    "ROLLBACK_COMPLETE",
)


def template(model_key: str, bake_s: int) -> dict[str, Any]:
    """What infra/stacks/endpoint.py synthesizes, reduced to the resources an update touches."""
    return {
        "Resources": {
            "Model": {
                "Type": "AWS::SageMaker::Model",
                "Properties": {
                    "ExecutionRoleArn": ROLE,
                    "PrimaryContainer": {"Image": IMAGE, "ModelDataUrl": f"s3://models/{model_key}"},
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
            "Latency": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "AlarmName": ALARMS[0],
                    "ComparisonOperator": "GreaterThanThreshold",
                    "DatapointsToAlarm": 2,
                    "EvaluationPeriods": 3,
                    "ExtendedStatistic": "p90",
                    "MetricName": "ModelLatency",
                    "Namespace": "AWS/SageMaker",
                    "Dimensions": DIMS,
                    "Period": 60,
                    "Threshold": LATENCY_ALARM_US,
                    "TreatMissingData": "notBreaching",
                    "Tags": [{"Key": "sagebox:app", "Value": "test"}],
                },
            },
            "Errors": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "AlarmName": ALARMS[1],
                    "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                    "EvaluationPeriods": 1,
                    "MetricName": "Invocation5XXErrors",
                    "Namespace": "AWS/SageMaker",
                    "Dimensions": DIMS,
                    "Period": 60,
                    "Statistic": "Sum",
                    "Threshold": 1,
                    "TreatMissingData": "notBreaching",
                },
            },
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": ENDPOINT,
                    "EndpointConfigName": {"Fn::GetAtt": ["Config", "EndpointConfigName"]},
                    "RetainAllVariantProperties": True,
                    "DeploymentConfig": {
                        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": name} for name in ALARMS]},
                        "BlueGreenUpdatePolicy": {
                            "MaximumExecutionTimeoutInSeconds": 1620,
                            "TerminationWaitInSeconds": 120,
                            "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": bake_s},
                        },
                    },
                },
                "DependsOn": ["Errors", "Latency"],
            },
            "ScalableTarget": {
                "Type": "AWS::ApplicationAutoScaling::ScalableTarget",
                "Properties": {
                    "MaxCapacity": 2,
                    "MinCapacity": 1,
                    "ResourceId": {
                        "Fn::Join": [
                            "",
                            ["endpoint/", {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, "/variant/AllTraffic"],
                        ]
                    },
                    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                    "ServiceNamespace": "sagemaker",
                },
            },
            "InvocationsPerInstance": {
                "Type": "AWS::ApplicationAutoScaling::ScalingPolicy",
                "Properties": {
                    "PolicyName": f"{ENDPOINT}-invocations-per-instance",
                    "PolicyType": "TargetTrackingScaling",
                    "ScalingTargetId": {"Ref": "ScalableTarget"},
                    "TargetTrackingScalingPolicyConfiguration": {
                        "PredefinedMetricSpecification": {
                            "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
                        },
                        "ScaleInCooldown": 300,
                        "ScaleOutCooldown": 60,
                        "TargetValue": 100000,
                    },
                },
            },
        },
        "Outputs": {
            "EndpointName": {"Value": {"Fn::GetAtt": ["Endpoint", "EndpointName"]}},
            "ConfigName": {"Value": {"Fn::GetAtt": ["Config", "EndpointConfigName"]}},
        },
    }


def deploy(box: ScaledBox, body: dict[str, Any], kind: str) -> dict[str, Any]:
    """What `cdk deploy` does (a change set, then its execution), polled until the stack is done."""
    cloudformation = box.client("cloudformation")
    name = "cdk-deploy-change-set"
    cloudformation.create_change_set(
        StackName=STACK, ChangeSetName=name, TemplateBody=json.dumps(body), ChangeSetType=kind
    )
    cloudformation.get_waiter("change_set_create_complete").wait(
        StackName=STACK, ChangeSetName=name, WaiterConfig={"Delay": 1}
    )
    cloudformation.execute_change_set(StackName=STACK, ChangeSetName=name)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        [stack] = cloudformation.describe_stacks(StackName=STACK)["Stacks"]
        if stack["StackStatus"] in TERMINAL:
            return dict(stack)
        time.sleep(0.2)
    raise AssertionError(f"{STACK} did not finish: {stack['StackStatus']}")


def outputs(stack: dict[str, Any]) -> dict[str, str]:
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def config_exists(box: ScaledBox, name: str) -> bool:
    try:
        box.client("sagemaker").describe_endpoint_config(EndpointConfigName=name)
    except ClientError:
        return False
    return True


def test_a_stack_update_runs_the_endpoints_guardrails_and_rolls_back_the_stack_with_it(scaled_box: ScaledBox) -> None:
    box = scaled_box
    s3 = box.client("s3")
    s3.copy_object(Bucket="models", Key="good-v2.tar.gz", CopySource={"Bucket": "models", "Key": "good.tar.gz"})

    created = deploy(box, template("good.tar.gz", bake_s=600), "CREATE")
    assert created["StackStatus"] == "CREATE_COMPLETE"
    first = outputs(created)["ConfigName"]
    cloudwatch, autoscaling = box.client("cloudwatch"), box.client("application-autoscaling")
    described = cloudwatch.describe_alarms(AlarmNames=ALARMS)["MetricAlarms"]
    assert sorted(a["AlarmName"] for a in described) == sorted(ALARMS)  # created from the template
    resource = f"endpoint/{ENDPOINT}/variant/AllTraffic"
    [target] = autoscaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource])[
        "ScalableTargets"
    ]
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (resource, 1, 2)
    [policy] = autoscaling.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource)[
        "ScalingPolicies"
    ]
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 100000

    # A model that answers 500s: the Model and EndpointConfig are replaced, so the endpoint updates.
    with Load(box, ENDPOINT) as load:
        failed = deploy(box, template("fail.tar.gz", bake_s=600), "UPDATE")
    assert failed["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    events = box.client("cloudformation").describe_stack_events(StackName=STACK)["StackEvents"]
    reasons = [e.get("ResourceStatusReason", "") for e in events if e["ResourceStatus"] == "UPDATE_FAILED"]
    assert reasons and f"Endpoint {ENDPOINT} did not update" in reasons[0] and f"alarm {ALARMS[1]}" in reasons[0]
    endpoint = box.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == ("InService", first)
    assert outputs(failed)["ConfigName"] == first and config_exists(box, first)  # the previous config is back
    assert set(load.outcomes) == {"ok", "ModelError 500"} and load.outcomes["ok"] > 0

    # A good model: the update completes and the replaced config is cleaned up.
    done = deploy(box, template("good-v2.tar.gz", bake_s=100), "UPDATE")
    assert done["StackStatus"] == "UPDATE_COMPLETE"
    second = outputs(done)["ConfigName"]
    endpoint = box.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert second != first and (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == ("InService", second)
    assert not config_exists(box, first)
    assert endpoint["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == (
        "ALL_AT_ONCE"
    )
