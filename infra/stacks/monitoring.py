"""Alarms that roll a blue/green deployment back (model latency p90, 5xx errors), and a dashboard.

One pair of alarms per production variant: an endpoint with one variant names them `<endpoint>-model-latency-p90`
and `<endpoint>-5xx-errors`; with several, `<endpoint>-<variant>-...` (CloudWatch alarms watch one metric, and
SageMaker reports invocation metrics per variant).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw
from constructs import Construct

from infra.targets import AlarmSpec

INVOCATION_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
ONE_MINUTE = cdk.Duration.minutes(1)
# ModelLatency is reported in microseconds.
US_PER_MS = 1000


def _pascal(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name) if part)


class EndpointMonitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        variant_names: Sequence[str],
        alarms: AlarmSpec,
        serverless: bool = False,
        asynchronous: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        several = len(variant_names) > 1
        dims = {"EndpointName": endpoint_name, "VariantName": variant_names[0]}
        # Literal names: the endpoint's rollback config and the dashboard name the alarms without referencing
        # the resources (moto cannot resolve references to the alarms it skips).
        self.alarm_names: list[str] = []
        self._alarms: list[cw.Alarm] = []

        def metric(
            name: str,
            statistic: str,
            namespace: str = INVOCATION_NAMESPACE,
            label: str = "",
            variant: str | None = None,
        ) -> cw.Metric:
            return cw.Metric(
                namespace=namespace,
                metric_name=name,
                dimensions_map=dims if variant is None else {**dims, "VariantName": variant},
                statistic=statistic,
                period=ONE_MINUTE,
                label=label or None,
            )

        for variant in variant_names:
            named = f"{endpoint_name}-{variant}" if several else endpoint_name
            suffix = _pascal(variant) if several else ""
            latency = cw.Alarm(
                self,
                f"LatencyP90{suffix}",
                alarm_name=f"{named}-model-latency-p90",
                alarm_description=f"{named}: model latency p90 > {alarms.latency_p90_ms:g} ms for 3 min",
                metric=metric("ModelLatency", "p90", variant=variant),
                threshold=alarms.latency_p90_ms * US_PER_MS,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                evaluation_periods=3,
                datapoints_to_alarm=3,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            errors = cw.Alarm(
                self,
                f"Errors5xx{suffix}",
                alarm_name=f"{named}-5xx-errors",
                alarm_description=f"{named}: {alarms.errors_5xx_per_minute}+ 5xx errors in a minute",
                metric=metric("Invocation5XXErrors", "Sum", variant=variant),
                threshold=alarms.errors_5xx_per_minute,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=1,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            self._alarms += [latency, errors]
            self.alarm_names += [f"{named}-model-latency-p90", f"{named}-5xx-errors"]
        self.latency_alarm, self.errors_alarm = self._alarms[0], self._alarms[1]

        def per_variant(name: str, statistic: str, label: str) -> list[cw.IMetric]:
            if not several:
                return [metric(name, statistic, label=label)]
            return [metric(name, statistic, label=f"{v} {label}", variant=v) for v in variant_names]

        self.dashboard = cw.Dashboard(self, "Dashboard", default_interval=cdk.Duration.hours(3))
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Invocations and errors (per minute)",
                left=per_variant("Invocations", "Sum", "invocations"),
                right=[
                    *per_variant("Invocation4XXErrors", "Sum", "4xx"),
                    *per_variant("Invocation5XXErrors", "Sum", "5xx"),
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
                ]
                if not several
                else [
                    cw.MathExpression(
                        expression=f"{stat}v{i} / {US_PER_MS}",
                        using_metrics={f"{stat}v{i}": metric("ModelLatency", stat, variant=variant)},
                        label=f"{variant} {stat}",
                        period=ONE_MINUTE,
                    )
                    for i, variant in enumerate(variant_names)
                    for stat in ("p50", "p90")
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
        if serverless:
            # Serverless endpoints report the time to launch compute for a cold start (ModelSetupTime, microseconds:
            # https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints-monitoring.html).
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Serverless cold starts (model setup time, ms)",
                    left=[
                        cw.MathExpression(
                            expression=f"setup / {US_PER_MS}",
                            using_metrics={"setup": metric("ModelSetupTime", "Maximum")},
                            label="max setup time",
                            period=ONE_MINUTE,
                        )
                    ],
                    right=[metric("ModelSetupTime", "SampleCount", label="cold starts")],
                    width=24,
                )
            )
        if asynchronous:
            # The queue of an asynchronous endpoint (per endpoint, no variant:
            # https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html).
            queue = {"EndpointName": endpoint_name}
            self.dashboard.add_widgets(
                cw.GraphWidget(
                    title="Asynchronous queue",
                    left=[
                        cw.Metric(
                            namespace=INVOCATION_NAMESPACE,
                            metric_name=name,
                            dimensions_map=queue,
                            statistic="Average",
                            period=ONE_MINUTE,
                            label=label,
                        )
                        for name, label in (
                            ("ApproximateBacklogSize", "backlog"),
                            ("ApproximateBacklogSizePerInstance", "backlog per instance"),
                        )
                    ],
                    width=24,
                )
            )

    @property
    def alarms(self) -> list[cw.Alarm]:
        return list(self._alarms)
