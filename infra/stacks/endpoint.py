"""One stack per target: execution role, model, endpoint config, blue/green endpoint, autoscaling, alarms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from infra import nag
from infra.plan import VARIANT_NAME, BuildImage, EndpointPlan, LocalModel
from infra.stacks.artifacts import BUCKET_NAME, ArtifactsStack, bucket_name
from infra.stacks.monitoring import EndpointMonitoring

DATA_CAPTURE_PREFIX = "data-capture"


@dataclass(frozen=True)
class Arn:
    """An ARN over CloudFormation pseudo parameters, and the same ARN as cdk-nag spells it in finding IDs."""

    value: str
    finding: str

    @classmethod
    def of(cls, template: str) -> Arn:
        return cls(
            value=template.format(partition=cdk.Aws.PARTITION, region=cdk.Aws.REGION, account=cdk.Aws.ACCOUNT_ID),
            finding=template.format(partition="<AWS::Partition>", region="<AWS::Region>", account="<AWS::AccountId>"),
        )


def serving_image_asset(scope: Construct, construct_id: str, image: BuildImage) -> ecr_assets.DockerImageAsset:
    """A serving image as a CDK image asset: what `cdk synth` stages and cdk-assets builds (linux/amd64).

    Whichever the plan chose: the CPU image (container/Dockerfile) or the Neuron image (container/Dockerfile.neuron).
    """
    return ecr_assets.DockerImageAsset(
        scope,
        construct_id,
        directory=str(image.context),
        file=image.dockerfile,
        platform=ecr_assets.Platform.LINUX_AMD64,
        exclude=list(image.exclude),
        ignore_mode=cdk.IgnoreMode.DOCKER,
        build_args=dict(image.build_args) or None,
    )


class EndpointStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        plan: EndpointPlan,
        artifacts: ArtifactsStack,
        **kwargs: Any,
    ) -> None:
        emulated = " (neuron_emu: emulated on the host CPU)" if plan.neuron_backend == "neuron_emu" else ""
        super().__init__(
            scope,
            construct_id,
            description=f"Sagebox endpoint {plan.endpoint_name}: {plan.variant} on {plan.instance.name}{emulated}",
            **kwargs,
        )
        self.add_stack_dependency(artifacts, "the endpoint uses the artifacts key and bucket")
        self.plan = plan
        image_uri, repository_arn = self._image()
        model_url, model_object_arn = self._model_data()
        capture = plan.target.data_capture
        capture_prefix = f"{DATA_CAPTURE_PREFIX}/{plan.endpoint_name}"
        self.role = self._execution_role(
            repository_arn, model_object_arn, artifacts, capture_prefix if capture else None
        )

        model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            enable_network_isolation=True,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image_uri,
                model_data_url=model_url,
                mode="SingleModel",
                environment=dict(plan.environment),
            ),
        )
        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=model.attr_model_name,
                    instance_type=plan.instance.name,
                    initial_instance_count=plan.target.instance_count,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=plan.startup_timeout_s,
                )
            ],
            kms_key_id=artifacts.key.key_arn if plan.volume_kms else None,
            data_capture_config=(
                sagemaker.CfnEndpointConfig.DataCaptureConfigProperty(
                    enable_capture=True,
                    initial_sampling_percentage=capture.sampling_percent,
                    destination_s3_uri=f"s3://{bucket_name(artifacts.prefix)}/{capture_prefix}",
                    kms_key_id=artifacts.key.key_arn,
                    capture_options=[
                        sagemaker.CfnEndpointConfig.CaptureOptionProperty(capture_mode=mode.capitalize())
                        for mode in capture.capture
                    ],
                    capture_content_type_header=sagemaker.CfnEndpointConfig.CaptureContentTypeHeaderProperty(
                        json_content_types=["application/json"]
                    ),
                )
                if capture
                else None
            ),
        )
        self.monitoring = EndpointMonitoring(
            self,
            "Monitoring",
            endpoint_name=plan.endpoint_name,
            variant_name=VARIANT_NAME,
            alarms=plan.target.alarms,
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_name=plan.endpoint_name,
            endpoint_config_name=config.attr_endpoint_config_name,
            # Keep the instance count autoscaling chose when a deploy changes the model or config.
            retain_all_variant_properties=True,
            deployment_config=self._deployment_config(),
        )
        for alarm in self.monitoring.alarms:
            self.endpoint.node.add_dependency(alarm)
        if plan.target.autoscaling:
            self._autoscaling()

        cdk.CfnOutput(self, "EndpointName", value=self.endpoint.attr_endpoint_name, description="Invoke this endpoint")
        cdk.CfnOutput(self, "TargetName", value=plan.name)
        cdk.CfnOutput(self, "InstanceType", value=plan.instance.name)
        cdk.CfnOutput(self, "ModelVariant", value=plan.variant)
        cdk.CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        if plan.neuron_backend:
            cdk.CfnOutput(
                self,
                "NeuronBackend",
                value=plan.neuron_backend,
                description="What compiled the model: torch_neuronx (NeuronCores) or neuron_emu (the host CPU)",
            )

    def _image(self) -> tuple[str, str | None]:
        """The image URI and the ECR repository ARN the role pulls from (None: not an ECR image)."""
        image = self.plan.image
        if isinstance(image, BuildImage):
            asset = serving_image_asset(self, "Image", image)
            return asset.image_uri, asset.repository.repository_arn
        return image.uri, image.repository.arn if image.repository else None

    def _model_data(self) -> tuple[str, str]:
        """The model data URL and the ARN of that one object."""
        model = self.plan.model
        if isinstance(model, LocalModel):
            asset = s3_assets.Asset(self, "ModelData", path=str(model.path))
            url, bucket, key = asset.s3_object_url, asset.s3_bucket_name, asset.s3_object_key
        else:
            url, bucket, key = model.uri, model.bucket, model.key
        return url, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}/{key}"

    def _execution_role(
        self,
        repository_arn: str | None,
        model_object_arn: str,
        artifacts: ArtifactsStack,
        capture_prefix: str | None,
    ) -> iam.Role:
        """Least privilege for serving one endpoint; each `*` is acknowledged to cdk-nag with its reason."""
        endpoint_name = self.plan.endpoint_name
        log_group = Arn.of(
            f"arn:{{partition}}:logs:{{region}}:{{account}}:log-group:/aws/sagemaker/Endpoints/{endpoint_name}"
        )
        statements = [
            iam.PolicyStatement(sid="ReadModelData", actions=["s3:GetObject"], resources=[model_object_arn]),
            iam.PolicyStatement(
                sid="WriteEndpointLogs",
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:DescribeLogStreams",
                    "logs:PutLogEvents",
                ],
                resources=[log_group.value, f"{log_group.value}:*"],
            ),
            iam.PolicyStatement(
                sid="PublishInstanceMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
            ),
        ]
        findings = {
            f"Resource::{log_group.finding}:*": "SageMaker names the log streams per instance at run time.",
            "Resource::*": "cloudwatch:PutMetricData supports no resource-level permissions; a condition "
            "limits it to SageMaker's /aws/sagemaker/* namespaces.",
        }
        if repository_arn is not None:
            statements += [
                iam.PolicyStatement(
                    sid="PullServingImage",
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                    ],
                    resources=[repository_arn],
                ),
                iam.PolicyStatement(sid="AuthenticateToEcr", actions=["ecr:GetAuthorizationToken"], resources=["*"]),
            ]
            findings["Resource::*"] += " ecr:GetAuthorizationToken supports no resource-level permissions either."
        # Model data uploaded to the artifacts bucket is encrypted with the artifacts key.
        key_actions = ["kms:Decrypt"]
        if capture_prefix is not None:
            bucket = BUCKET_NAME.replace("{prefix}", artifacts.prefix)
            captured = Arn.of(f"arn:{{partition}}:s3:::{bucket}/{capture_prefix}/*")
            statements.append(
                iam.PolicyStatement(sid="WriteDataCapture", actions=["s3:PutObject"], resources=[captured.value])
            )
            key_actions.append("kms:GenerateDataKey")
            findings[f"Resource::{captured.finding}"] = (
                "SageMaker names the captured objects under this endpoint's data-capture prefix at run time."
            )
        statements.append(
            iam.PolicyStatement(sid="UseArtifactsKey", actions=key_actions, resources=[artifacts.key.key_arn])
        )
        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description=f"SageMaker execution role of endpoint {endpoint_name}",
            inline_policies={"serving": iam.PolicyDocument(statements=statements)},
        )
        for finding, reason in findings.items():
            nag.acknowledge(role, f"AwsSolutions-IAM5[{finding}]", reason)
        return role

    def _deployment_config(self) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        """Blue/green: canary (all at once for one instance), bake, roll back when an alarm fires."""
        plan = self.plan
        deployment = plan.target.deployment
        traffic = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
            type="CANARY" if plan.canary_instances else "ALL_AT_ONCE",
            canary_size=(
                sagemaker.CfnEndpoint.CapacitySizeProperty(type="INSTANCE_COUNT", value=plan.canary_instances)
                if plan.canary_instances
                else None
            ),
            wait_interval_in_seconds=deployment.bake_s,
        )
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            blue_green_update_policy=sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
                traffic_routing_configuration=traffic,
                termination_wait_in_seconds=deployment.termination_wait_s,
                maximum_execution_timeout_in_seconds=plan.max_deployment_s,
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=n) for n in self.monitoring.alarm_names]
            ),
        )

    def _autoscaling(self) -> None:
        """Target tracking on invocations per instance.

        L1 resources: without a RoleARN, Application Auto Scaling uses its SageMaker service-linked role
        (the L2 construct would add a role of its own that has no permissions).
        """
        scaling = self.plan.target.autoscaling
        assert scaling is not None
        target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{self.endpoint.attr_endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=scaling.min_instances,
            max_capacity=scaling.max_instances,
        )
        appscaling.CfnScalingPolicy(
            self,
            "InvocationsPerInstance",
            policy_name=f"{self.plan.endpoint_name}-invocations-per-instance",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=scaling.invocations_per_instance,
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerVariantInvocationsPerInstance"
                ),
                scale_in_cooldown=scaling.scale_in_cooldown_s,
                scale_out_cooldown=scaling.scale_out_cooldown_s,
            ),
        )
