"""The embedded AWS: a moto server, patched where moto lacks what real AWS clients need, plus the box's control plane.

moto stands in for AWS only. Each patch here makes moto answer as AWS documents it, for a client that the README
tells users to run (the CDK CLI and cdk-assets, boto3, the SageMaker SDK); infra/README.md lists every one:

- `sagemaker` (with `endpoint_configs` and `endpoint_updates`): the instance types of Sagebox's catalog; endpoints
  start `Creating` and change status only when the box's control plane has started (or failed to start) their
  containers; `EndpointName` from templates is honoured; a second `CreateEndpoint` of a name is refused;
  `UpdateEndpoint` exists with its `DeploymentConfig` (deployment guardrails: the control plane runs blue/green all
  at once, canary and linear updates with bakes, alarm rollbacks and the termination wait;
  `PendingDeploymentSummary`, `LastDeploymentConfig`, `RollingBack`), `RetainAllVariantProperties` and
  `RetainDeploymentConfig`; `UpdateEndpointWeightsAndCapacities` starts and stops instances before the counts
  change.
- `cloudformation`: change sets (the CDK CLI's default deploy method) resolve `Fn::ImportValue`, register their
  stack's outputs and exports, are removed once one is executed, fail the stack with a reason (not a server error)
  when a resource fails, and keep the stack in progress until its endpoints are InService on the template's
  config, as CloudFormation waits for AWS::SageMaker::Endpoint (an update the endpoint rolled back fails it).
- `cfn_updates`: stack updates in dependency order (a replaced resource updates what references it), replaced and
  removed resources deleted only once the update succeeded, a failed update rolled back (UPDATE_ROLLBACK_COMPLETE).
- `cloudwatch`: AWS::CloudWatch::Alarm from templates; alarms evaluated by the control plane (state and reason);
  GetMetricStatistics matches dimensions exactly; PutMetricData `Values` kept as one datum, with a retention.
- `autoscaling`: AWS::ApplicationAutoScaling::ScalableTarget and ::ScalingPolicy from templates; target tracking
  on SageMakerVariantInvocationsPerInstance run by the control plane.
- `logs`: FilterLogEvents interleaves every stream's events by time, as AWS always does (endpoint logs:
  sagebox.box.endpoint_logs).
- `kms`: keys created from templates accept CloudFormation's `{Key, Value}` tags.
- `ecr`: repositories live in a real local OCI registry: repository URIs and the authorization token's proxy
  endpoint name it, and the images ECR lists are the registry's.
- `sns_dedupe`: an identical SageMaker async notification published twice to a topic is delivered once (the
  gateway republishes a recorded one after a restart).
- `persistence` (with `--persist`, as `sagebox up` runs it): every backend snapshotted to the state directory before
  each state-changing answer, and restored at start, serving endpoints deployed again.

Box time: `SAGEBOX_BOX_TIME_SCALE` (read by the embedded AWS process, see `config.TIME_SCALE_ENV`) shortens every
wait of the box's SageMaker, CloudWatch and Application Auto Scaling by the same factor.
"""

from sagebox.box.embedded_aws.config import EmbeddedAwsConfig

__all__ = ["EmbeddedAwsConfig"]
