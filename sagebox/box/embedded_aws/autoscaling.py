"""moto's Application Auto Scaling, made to deploy from templates and to scale SageMaker variants (listed in
infra/README.md).

1. Templates: moto's CloudFormation skipped AWS::ApplicationAutoScaling::ScalableTarget and ::ScalingPolicy; here
   they are registered in moto's Application Auto Scaling (a target's Ref is CloudFormation's
   `resource-id|dimension|namespace`, which a policy's ScalingTargetId names), updated and deleted with their stack.
2. Policies run: moto stores them and never scales. The box's control plane runs every target tracking policy on
   a SageMaker variant's `SageMakerVariantInvocationsPerInstance` (`Autoscaler`, with sagebox.box.autoscaling) on
   the invocations the gateway measured, or on a customized metric such as an asynchronous endpoint's
   `ApproximateBacklogSizePerInstance` (AWS's async autoscaling example:
   https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-autoscale.html), and changes the variant's
   instance count as Application Auto Scaling does: through UpdateEndpointWeightsAndCapacities, after which the
   control plane starts or stops instances and DescribeEndpoint reports the new count. Each scaling is logged (the
   embedded AWS's log) and kept in `activities` for `sagebox status`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.applicationautoscaling.models import FakeApplicationAutoscalingPolicy, applicationautoscaling_backends
from moto.core.common_models import CloudFormationModel

from sagebox.box import autoscaling as policy_logic
from sagebox.box.alarms import datapoints, periods
from sagebox.box.embedded_aws import cloudwatch
from sagebox.box.embedded_aws.cfn_attributes import ArnAttribute
from sagebox.box.invocation_metrics import NAMESPACE

log = logging.getLogger("sagebox.autoscaling")

SAGEMAKER_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
_lock = threading.Lock()
_applied = False


def _target_id(resource_id: str, dimension: str, namespace: str) -> str:
    return f"{resource_id}|{dimension}|{namespace}"


class ScalableTargetResource(CloudFormationModel):
    """AWS::ApplicationAutoScaling::ScalableTarget, registered in moto's Application Auto Scaling."""

    def __init__(self, resource_id: str, dimension: str, namespace: str) -> None:
        self.resource_id, self.dimension, self.namespace = resource_id, dimension, namespace

    @property
    def physical_resource_id(self) -> str:
        return _target_id(self.resource_id, self.dimension, self.namespace)

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::ApplicationAutoScaling::ScalableTarget"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> ScalableTargetResource:
        props = cloudformation_json.get("Properties", {})
        backend = applicationautoscaling_backends[account_id][region_name]
        suspended = props.get("SuspendedState")
        target = backend.register_scalable_target(
            str(props["ServiceNamespace"]),
            str(props["ResourceId"]),
            str(props["ScalableDimension"]),
            int(props["MinCapacity"]),
            int(props["MaxCapacity"]),
            str(props.get("RoleARN", "")),
            {k: v in (True, "true") for k, v in suspended.items()} if suspended else None,  # type: ignore[arg-type]
        )
        return cls(target.resource_id, target.scalable_dimension, target.service_namespace)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: ScalableTargetResource,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> ScalableTargetResource:
        props = cloudformation_json.get("Properties", {})
        if (props.get("ResourceId"), props.get("ScalableDimension")) != (
            original_resource.resource_id,
            original_resource.dimension,
        ):
            original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        backend = applicationautoscaling_backends[account_id][region_name]
        for key, policy in list(backend.policies.items()):
            if (policy.resource_id, policy.scalable_dimension) == (self.resource_id, self.dimension):
                del backend.policies[key]
        if backend._scalable_target_exists(self.resource_id, self.dimension):
            backend.deregister_scalable_target(self.namespace, self.resource_id, self.dimension)


class ScalingPolicyResource(ArnAttribute, CloudFormationModel):
    """AWS::ApplicationAutoScaling::ScalingPolicy, put into moto's Application Auto Scaling."""

    def __init__(self, arn: str, name: str, resource_id: str, dimension: str, namespace: str) -> None:
        self.arn, self.name = arn, name
        self.resource_id, self.dimension, self.namespace = resource_id, dimension, namespace

    @property
    def physical_resource_id(self) -> str:
        return self.arn

    @staticmethod
    def cloudformation_name_type() -> str:
        return "PolicyName"

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::ApplicationAutoScaling::ScalingPolicy"

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> ScalingPolicyResource:
        props = cloudformation_json.get("Properties", {})
        if props.get("ScalingTargetId"):
            resource_id, dimension, namespace = str(props["ScalingTargetId"]).split("|")
        else:
            resource_id = str(props["ResourceId"])
            dimension = str(props["ScalableDimension"])
            namespace = str(props["ServiceNamespace"])
        kind = str(props["PolicyType"])
        body = props.get("TargetTrackingScalingPolicyConfiguration") or props.get("StepScalingPolicyConfiguration")
        name = str(props.get("PolicyName") or resource_name)
        backend = applicationautoscaling_backends[account_id][region_name]
        policy = backend.put_scaling_policy(name, namespace, resource_id, dimension, body or {}, kind)
        return cls(policy.policy_arn, name, resource_id, dimension, namespace)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: ScalingPolicyResource,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> ScalingPolicyResource:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        backend = applicationautoscaling_backends[account_id][region_name]
        key = FakeApplicationAutoscalingPolicy.formulate_key(
            self.namespace, self.resource_id, self.dimension, self.name
        )
        backend.policies.pop(key, None)


def apply() -> None:
    """Define the template resources (idempotent); moto's model map is refreshed by the CloudWatch patch."""
    global _applied
    with _lock:
        if _applied:
            return
        _applied = True
    cloudwatch._refresh_cloudformation_models()


def tracked_metric(config: Any, endpoint: str, variant: str) -> tuple[str, str, list[dict[str, str]], str]:
    """(namespace, metric, dimensions, statistic) a target tracking policy follows: the predefined invocations per
    instance of the variant (a per-minute Sum), or its CustomizedMetricSpecification (e.g. an asynchronous
    endpoint's ApproximateBacklogSizePerInstance, Average, dimension EndpointName)."""
    custom = config.get("CustomizedMetricSpecification") or {}
    if custom.get("MetricName"):
        dims = [{"Name": str(d["Name"]), "Value": str(d["Value"])} for d in custom.get("Dimensions") or []]
        return (
            str(custom.get("Namespace", NAMESPACE)),
            str(custom["MetricName"]),
            dims,
            str(custom.get("Statistic", "Average")),
        )
    dims = [{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": variant}]
    return NAMESPACE, "InvocationsPerInstance", dims, "Sum"


@dataclass
class Watch:
    """One target tracking policy being run: since when (box time), its history, and what it did last."""

    since: float
    history: policy_logic.History = field(default_factory=policy_logic.History)


@dataclass(frozen=True)
class Activity:
    at: float  # epoch seconds
    endpoint: str
    variant: str
    old: int
    new: int
    cause: str


class Autoscaler:
    """Runs the target tracking policies on SageMaker variants, one `tick(now)` per control-plane pass."""

    def __init__(
        self,
        account_id: str,
        region: str,
        sagemaker: Callable[[], Any],
        scale: float = 1.0,
        delay_s: float = 0.0,
    ) -> None:
        self._account_id, self._region = account_id, region
        self._sagemaker = sagemaker
        self._scale = scale
        self._delay_s = delay_s
        self._watches: dict[str, Watch] = {}
        self.activities: list[Activity] = []

    def tick(self, now: float) -> None:
        backend = applicationautoscaling_backends[self._account_id][self._region]
        metrics = cloudwatch.cloudwatch_backends[self._account_id][self._region]
        box_now = now / self._scale
        seen = set()
        for key, policy in list(backend.policies.items()):
            if policy.service_namespace != "sagemaker" or policy.scalable_dimension != SAGEMAKER_DIMENSION:
                continue
            config = policy.target_tracking_scaling_policy_configuration or {}
            metric = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
            custom = config.get("CustomizedMetricSpecification") or {}
            if policy.policy_type != "TargetTrackingScaling" or (
                metric != policy_logic.PREDEFINED_METRIC and not custom.get("MetricName")
            ):
                continue
            target = backend.targets.get(SAGEMAKER_DIMENSION, {}).get(policy.resource_id)
            parts = str(policy.resource_id).split("/")
            if target is None or len(parts) != 4 or parts[0] != "endpoint" or parts[2] != "variant":
                continue
            seen.add(key)
            watch = self._watches.setdefault(key, Watch(since=box_now))
            self._tick_one(policy, target, parts[1], parts[3], config, watch, metrics, now)
        for key in [k for k in self._watches if k not in seen]:
            del self._watches[key]

    def _tick_one(
        self,
        policy: Any,
        target: Any,
        endpoint_name: str,
        variant: str,
        config: Any,
        watch: Watch,
        metrics: Any,
        now: float,
    ) -> None:
        sagemaker = self._sagemaker()
        endpoint = sagemaker.endpoints.get(endpoint_name)
        if endpoint is None or endpoint.endpoint_status != "InService":
            return  # SageMaker refuses a capacity change while it is busy; Application Auto Scaling retries
        summary = next((v for v in endpoint.production_variants if v.get("VariantName") == variant), None)
        if summary is None:
            return
        capacity = int(summary.get("CurrentInstanceCount") or 1)
        suspended = target.suspended_state or {}
        bounds = policy_logic.Bounds(
            int(target.min_capacity),
            int(target.max_capacity),
            bool(suspended.get("DynamicScalingInSuspended")),
            bool(suspended.get("DynamicScalingOutSuspended")),
        )
        tracking = policy_logic.TargetTracking(
            float(config.get("TargetValue", 0)),
            float(config.get("ScaleInCooldown", policy_logic.DEFAULT_COOLDOWN_S)),
            float(config.get("ScaleOutCooldown", policy_logic.DEFAULT_COOLDOWN_S)),
            config.get("DisableScaleIn") in (True, "true"),
        )
        minute = policy_logic.METRIC_PERIOD_S * self._scale
        starts = [
            s
            for s in periods(now, minute, policy_logic.LOW_DATAPOINTS, self._delay_s)
            if s / self._scale >= watch.since
        ]
        minutes: tuple[float | None, ...] = ()
        if starts:
            namespace, name, dims, statistic = tracked_metric(config, endpoint_name, variant)
            data = cloudwatch.points(metrics, namespace, name, dims, starts[0])
            minutes = datapoints(data, statistic, starts, minute)
        decision = policy_logic.decide(tracking, bounds, capacity, minutes, now / self._scale, watch.history)
        if decision is None:
            return
        try:
            sagemaker.update_endpoint_weights_and_capacities(
                endpoint_name, [{"VariantName": variant, "DesiredInstanceCount": decision.desired}]
            )
        except Exception as exc:  # busy or gone: try again on the next pass
            log.info("autoscaling %s/%s to %d deferred: %s", endpoint_name, variant, decision.desired, exc)
            return
        policy_logic.record(watch.history, decision, capacity, now / self._scale)
        self.activities.append(Activity(now, endpoint_name, variant, capacity, decision.desired, decision.cause))
        del self.activities[:-50]
        log.info(
            "autoscaling %s/%s: %d -> %d instances (%s)",
            endpoint_name,
            variant,
            capacity,
            decision.desired,
            decision.cause,
        )
