"""Alarms that roll a blue/green deployment back (model latency p90, 5xx errors), and a dashboard."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.targets import AlarmSpec

INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
ONE_MINUTE = cdk.Duration.minutes(1)
# ModelLatency is reported in microseconds.
US_PER_MS = 1000


class EndpointMonitoring(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, endpoint_name: str, variant_name: str, alarms: AlarmSpec
    ) -> None:
        super().__init__(scope, construct_id)
        dims = {"EndpointName": endpoint_name, "VariantName": variant_name}
        # Literal names: the endpoint's rollback config and the dashboard name the alarms without referencing
        # the resources (moto cannot resolve references to the alarms it skips).
        self.alarm_names = [f"{endpoint_name}-model-latency-p90", f"{endpoint_name}-5xx-errors"]

        def metric(name: str, statistic: str, namespace: str = INVOCATION_NAMESPACE, label: str = "") -> cw.Metric:
            return cw.Metric(
                namespace=namespace,
                metric_name=name,
                dimensions_map=dims,
                statistic=statistic,
                period=ONE_MINUTE,
                label=label or None,
            )

        self.latency_alarm = cw.Alarm(
            self,
            "LatencyP90",
            alarm_name=self.alarm_names[0],
            alarm_description=f"{endpoint_name}: model latency p90 > {alarms.latency_p90_ms:g} ms for 3 min",
            metric=metric("ModelLatency", "p90"),
            threshold=alarms.latency_p90_ms * US_PER_MS,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=3,
            datapoints_to_alarm=3,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.errors_alarm = cw.Alarm(
            self,
            "Errors5xx",
            alarm_name=self.alarm_names[1],
            alarm_description=f"{endpoint_name}: {alarms.errors_5xx_per_minute}+ 5xx errors in a minute",
            metric=metric("Invocation5XXErrors", "Sum"),
            threshold=alarms.errors_5xx_per_minute,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
        )
        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.hours(3))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Invocations and errors (per minute)",
                left=[metric("Invocations", "Sum", label="invocations")],
                right=[
                    metric("Invocation4XXErrors", "Sum", label="4xx"),
                    metric("Invocation5XXErrors", "Sum", label="5xx"),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Model latency (ms)",
                left=[
                    cw.MathExpression(
                        expression=f"{stat} / {US_PER_MS}",
                        using_metrics={stat: metric("ModelLatency", stat)},
                        label=stat,
                        period=ONE_MINUTE,
                    )
                    for stat in ("p50", "p90", "p99")
                ],
                left_annotations=[cw.HorizontalAnnotation(value=alarms.latency_p90_ms, label="p90 alarm")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Instance utilization (%)",
                left=[
                    metric("CPUUtilization", "Average", INSTANCE_NAMESPACE, "CPU (100 % per vCPU)"),
                    metric("MemoryUtilization", "Average", INSTANCE_NAMESPACE, "memory"),
                    metric("DiskUtilization", "Average", INSTANCE_NAMESPACE, "disk"),
                ],
                width=12,
            ),
            cw.AlarmStatusWidget(
                title="Rollback alarms",
                alarms=[cw.Alarm.from_alarm_name(self, f"Named{i}", name) for i, name in enumerate(self.alarm_names)],
                width=12,
            ),
        )

    @property
    def alarms(self) -> list[cw.Alarm]:
        return [self.latency_alarm, self.errors_alarm]
