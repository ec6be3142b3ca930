"""One stack per target: execution role, models, endpoint config, blue/green endpoint, autoscaling, alarms.

A target's endpoint is real-time (one or more production variants, optionally a shadow variant), serverless
(ServerlessConfig) or asynchronous (AsyncInferenceConfig); a target that sets none of the new fields renders
exactly as it always did (one `Model`, one `AllTraffic` variant).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
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
from infra.plan import VARIANT_NAME, BuildImage, EndpointPlan, LocalModel, RegistryImage, VariantPlan
from infra.stacks.artifacts import BUCKET_NAME, ArtifactsStack, bucket_name
from infra.stacks.monitoring import EndpointMonitoring
from infra.targets import S3_PREFIX

DATA_CAPTURE_PREFIX = "data-capture"
# Async inference's queue depth per instance (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html),
# the metric AWS's async autoscaling example tracks (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-autoscale.html).
BACKLOG_METRIC = "ApproximateBacklogSizePerInstance"


def pascal(name: str) -> str:
    """A variant name as a construct ID suffix: `int8-canary` -> `Int8Canary`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


def s3_objects_arn(location: str) -> Arn:
    """Every object under an s3://bucket[/prefix] location, as an ARN."""
    match = S3_PREFIX.match(location)
    if match is None:  # targets.py validated it
        raise ValueError(f"{location!r} is not an s3://bucket[/prefix] location")
    prefix = (match["prefix"] or "").strip("/")
    path = f"{match['bucket']}/{prefix}/*" if prefix else f"{match['bucket']}/*"
    return Arn.of("arn:{partition}:s3:::" + path.replace("{", "{{").replace("}", "}}"))


@dataclass(frozen=True)
class ModelSource:
    """What one SageMaker model of the stack is made of: its image and model data (variants that share an image,
    model data and environment share the model)."""

    key: tuple[Any, ...]
    image_uri: str
    repository_arn: str | None
    model_url: str
    model_object_arn: str


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
        capture = plan.target.data_capture
        capture_prefix = f"{DATA_CAPTURE_PREFIX}/{plan.endpoint_name}"
        self._images: list[tuple[BuildImage, ecr_assets.DockerImageAsset]] = []
        self._model_assets: dict[str, s3_assets.Asset] = {}
        self._models: dict[tuple[Any, ...], sagemaker.CfnModel] = {}
        variants = plan.variants or ()
        sources = {v.name: self._source(v) for v in (*variants, *plan.shadows)}
        distinct = list({s.key: s for s in sources.values()}.values())
        self.role = self._execution_role(
            list(dict.fromkeys(s.repository_arn for s in distinct if s.repository_arn)),
            list(dict.fromkeys(s.model_object_arn for s in distinct)),
            artifacts,
            capture_prefix if capture else None,
        )
        served = {v.name: self._model(sources[v.name], v) for v in (*variants, *plan.shadows)}

        config = sagemaker.CfnEndpointConfig(
            self,
            "EndpointConfig",
            production_variants=[self._variant_property(v, served[v.name]) for v in variants],
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
            shadow_production_variants=[self._variant_property(v, served[v.name]) for v in plan.shadows] or None,
            async_inference_config=self._async_config(),
        )
        self.monitoring = EndpointMonitoring(
            self,
            "Monitoring",
            endpoint_name=plan.endpoint_name,
            variant_names=[v.name for v in variants] or [VARIANT_NAME],
            alarms=plan.target.alarms,
            serverless=plan.serverless is not None,
            asynchronous=plan.async_inference is not None,
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
        if not plan.single_default_variant:
            described = [f"{v.name} ({v.weight:g})" for v in variants] + [
                f"{v.name} (shadow, {v.sampling_percent} %)" for v in plan.shadows
            ]
            cdk.CfnOutput(self, "Variants", value=", ".join(described), description="Variants and their weights")
        if plan.serverless:
            cdk.CfnOutput(
                self,
                "Serverless",
                value=f"{plan.serverless.memory_mb} MB, max concurrency {plan.serverless.max_concurrency}",
            )
        if plan.async_inference:
            cdk.CfnOutput(self, "AsyncOutputPath", value=plan.async_inference.output_path)
        cdk.CfnOutput(self, "ModelVariant", value=plan.variant)
        cdk.CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        if plan.neuron_backend:
            cdk.CfnOutput(
                self,
                "NeuronBackend",
                value=plan.neuron_backend,
                description="What compiled the model: torch_neuronx (NeuronCores) or neuron_emu (the host CPU)",
            )

    def _image(self, image: BuildImage | RegistryImage) -> tuple[str, str | None]:
        """The image URI and the ECR repository ARN the role pulls from (None: not an ECR image); one image asset
        per distinct build (the first is `Image`)."""
        if isinstance(image, BuildImage):
            asset = next((a for known, a in self._images if known == image), None)
            if asset is None:
                construct_id = "Image" if not self._images else f"Image{len(self._images) + 1}"
                asset = serving_image_asset(self, construct_id, image)
                self._images.append((image, asset))
            return asset.image_uri, asset.repository.repository_arn
        return image.uri, image.repository.arn if image.repository else None

    def _model_data(self, variant: VariantPlan) -> tuple[str, str]:
        """The model data URL and the ARN of that one object (one asset per local tarball, the first `ModelData`)."""
        model = variant.model
        if isinstance(model, LocalModel):
            key = str(model.path)
            asset = self._model_assets.get(key)
            if asset is None:
                construct_id = "ModelData" if not self._model_assets else f"ModelData{len(self._model_assets) + 1}"
                asset = self._model_assets[key] = s3_assets.Asset(self, construct_id, path=key)
            url, bucket, key = asset.s3_object_url, asset.s3_bucket_name, asset.s3_object_key
        else:
            url, bucket, key = model.uri, model.bucket, model.key
        return url, f"arn:{cdk.Aws.PARTITION}:s3:::{bucket}/{key}"

    def _source(self, variant: VariantPlan) -> ModelSource:
        image_uri, repository_arn = self._image(variant.image)
        model_url, model_object_arn = self._model_data(variant)
        key = (image_uri, model_url, tuple(sorted(variant.environment.items())))
        return ModelSource(key, image_uri, repository_arn, model_url, model_object_arn)

    def _model(self, source: ModelSource, variant: VariantPlan) -> sagemaker.CfnModel:
        """The SageMaker model of a variant, shared by variants of the same source (the first is `Model`, as the
        endpoint of a target without variants always had)."""
        found = self._models.get(source.key)
        if found is not None:
            return found
        construct_id = "Model" if not self._models else f"Model{pascal(variant.name)}"
        model = self._models[source.key] = sagemaker.CfnModel(
            self,
            construct_id,
            execution_role_arn=self.role.role_arn,
            # Serverless Inference does not support network isolation (its feature exclusions,
            # https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html).
            enable_network_isolation=self.plan.serverless is None,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=source.image_uri,
                model_data_url=source.model_url,
                mode="SingleModel",
                environment=dict(variant.environment),
            ),
        )
        return model

    def _variant_property(
        self, variant: VariantPlan, model: sagemaker.CfnModel
    ) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        serverless = self.plan.serverless
        if serverless is not None:
            # A serverless variant names no instance type, count or start-up timeout (ProductionVariant: those are
            # instance-based settings); SageMaker sizes it by memory and throttles past MaxConcurrency.
            return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=variant.name,
                model_name=model.attr_model_name,
                initial_variant_weight=variant.weight,
                serverless_config=sagemaker.CfnEndpointConfig.ServerlessConfigProperty(
                    memory_size_in_mb=serverless.memory_mb, max_concurrency=serverless.max_concurrency
                ),
            )
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=variant.name,
            model_name=model.attr_model_name,
            instance_type=variant.instance.name,
            initial_instance_count=variant.instance_count,
            initial_variant_weight=variant.weight,
            container_startup_health_check_timeout_in_seconds=self.plan.startup_timeout_s,
            model_data_download_timeout_in_seconds=self.plan.model_data_download_timeout_s,
            volume_size_in_gb=self.plan.volume_size_gb,
        )

    def _async_config(self) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty | None:
        """AsyncInferenceConfig: where answers and failures go, which SNS topics hear of them, and how many requests
        an instance takes at once."""
        spec = self.plan.async_inference
        if spec is None:
            return None
        topics = spec.success_topic or spec.error_topic
        return sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty(
            output_config=sagemaker.CfnEndpointConfig.AsyncInferenceOutputConfigProperty(
                s3_output_path=spec.output_path,
                s3_failure_path=spec.failure_path,
                notification_config=(
                    sagemaker.CfnEndpointConfig.AsyncInferenceNotificationConfigProperty(
                        success_topic=spec.success_topic, error_topic=spec.error_topic
                    )
                    if topics
                    else None
                ),
            ),
            client_config=(
                sagemaker.CfnEndpointConfig.AsyncInferenceClientConfigProperty(
                    max_concurrent_invocations_per_instance=spec.max_concurrent_invocations_per_instance
                )
                if spec.max_concurrent_invocations_per_instance
                else None
            ),
        )

    def _execution_role(
        self,
        repository_arns: Sequence[str],
        model_object_arns: Sequence[str],
        artifacts: ArtifactsStack,
        capture_prefix: str | None,
    ) -> iam.Role:
        """Least privilege for serving one endpoint (each model object and repository its variants use); each `*`
        is acknowledged to cdk-nag with its reason."""
        endpoint_name = self.plan.endpoint_name
        log_group = Arn.of(
            f"arn:{{partition}}:logs:{{region}}:{{account}}:log-group:/aws/sagemaker/Endpoints/{endpoint_name}"
        )
        statements = [
            iam.PolicyStatement(sid="ReadModelData", actions=["s3:GetObject"], resources=list(model_object_arns)),
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
        if repository_arns:
            statements += [
                iam.PolicyStatement(
                    sid="PullServingImage",
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                    ],
                    resources=list(repository_arns),
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
        statements += self._async_statements(findings)
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

    def _async_statements(self, findings: dict[str, str]) -> list[iam.PolicyStatement]:
        """Asynchronous inference: SageMaker reads each request's input, writes its answer or failure and publishes
        to the topics with the execution role (https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-create-endpoint-prerequisites.html);
        the objects are named per request at run time, so each location is a prefix wildcard."""
        spec = self.plan.async_inference
        if spec is None:
            return []
        inputs = s3_objects_arn(spec.input_path)
        outputs = [s3_objects_arn(path) for path in dict.fromkeys(filter(None, (spec.output_path, spec.failure_path)))]
        statements = [
            iam.PolicyStatement(sid="ReadAsyncInputs", actions=["s3:GetObject"], resources=[inputs.value]),
            iam.PolicyStatement(
                sid="WriteAsyncResults", actions=["s3:PutObject"], resources=[a.value for a in outputs]
            ),
        ]
        findings[f"Resource::{inputs.finding}"] = (
            "Callers name each asynchronous request's input object at run time; the role reads only under the "
            "target's async input_path."
        )
        for arn in outputs:
            findings[f"Resource::{arn.finding}"] = (
                "SageMaker names each asynchronous answer or failure object after its inference ID at run time, "
                "under the target's async output_path or failure_path only."
            )
        topics = list(dict.fromkeys(filter(None, (spec.success_topic, spec.error_topic))))
        if topics:
            statements.append(iam.PolicyStatement(sid="NotifyAsyncResults", actions=["sns:Publish"], resources=topics))
        return statements

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
        """Target tracking per production variant: on invocations per instance, or on an asynchronous endpoint's
        queue (ApproximateBacklogSizePerInstance, the endpoint's backlog per instance, as AWS's async autoscaling
        example tracks it).

        L1 resources: without a RoleARN, Application Auto Scaling uses its SageMaker service-linked role
        (the L2 construct would add a role of its own that has no permissions).
        """
        scaling = self.plan.target.autoscaling
        assert scaling is not None
        single = self.plan.single_default_variant
        for variant in self.plan.variants or ():
            suffix = "" if single else pascal(variant.name)
            named = self.plan.endpoint_name if single else f"{self.plan.endpoint_name}-{variant.name}"
            target = appscaling.CfnScalableTarget(
                self,
                f"ScalableTarget{suffix}",
                service_namespace="sagemaker",
                resource_id=f"endpoint/{self.endpoint.attr_endpoint_name}/variant/{variant.name}",
                scalable_dimension="sagemaker:variant:DesiredInstanceCount",
                min_capacity=scaling.min_instances,
                max_capacity=scaling.max_instances,
            )
            spec = appscaling.CfnScalingPolicy
            metric: dict[str, Any]
            if scaling.backlog_per_instance is not None:
                kind, policy, value = "BacklogPerInstance", "backlog-per-instance", scaling.backlog_per_instance
                metric = {
                    "customized_metric_specification": spec.CustomizedMetricSpecificationProperty(
                        metric_name=BACKLOG_METRIC,
                        namespace="AWS/SageMaker",
                        dimensions=[spec.MetricDimensionProperty(name="EndpointName", value=self.plan.endpoint_name)],
                        statistic="Average",
                    )
                }
            else:
                assert scaling.invocations_per_instance is not None  # targets.py: one of the two is set
                kind, policy = "InvocationsPerInstance", "invocations-per-instance"
                value = scaling.invocations_per_instance
                metric = {
                    "predefined_metric_specification": spec.PredefinedMetricSpecificationProperty(
                        predefined_metric_type="SageMakerVariantInvocationsPerInstance"
                    )
                }
            appscaling.CfnScalingPolicy(
                self,
                f"{kind}{suffix}",
                policy_name=f"{named}-{policy}",
                policy_type="TargetTrackingScaling",
                scaling_target_id=target.ref,
                target_tracking_scaling_policy_configuration=spec.TargetTrackingScalingPolicyConfigurationProperty(
                    target_value=value,
                    **metric,
                    scale_in_cooldown=scaling.scale_in_cooldown_s,
                    scale_out_cooldown=scaling.scale_out_cooldown_s,
                ),
            )
