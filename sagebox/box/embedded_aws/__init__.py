"""The embedded AWS: a moto server, patched where moto lacks what real AWS clients need, plus the box's control plane.

moto stands in for AWS only. Each patch here makes moto answer as AWS documents it, for a client that the README
tells users to run (the CDK CLI and cdk-assets, boto3, the SageMaker SDK); infra/README.md lists every one:

- `sagemaker`: the instance types of Sagebox's catalog; endpoints start `Creating` and change status only when the
  box's control plane has started (or failed to start) their containers; `EndpointName` from templates is
  honoured; `UpdateEndpoint` exists; a second `CreateEndpoint` of a name is refused.
- `cloudformation`: change sets (the CDK CLI's default deploy method) resolve `Fn::ImportValue`, register their
  stack's outputs and exports, fail the stack with a reason (not a server error) when a resource fails, and keep
  the stack in progress until its endpoints are InService, as CloudFormation waits for AWS::SageMaker::Endpoint.
- `kms`: keys created from templates accept CloudFormation's `{Key, Value}` tags.
- `ecr`: repositories live in a real local OCI registry: repository URIs and the authorization token's proxy
  endpoint name it, and the images ECR lists are the registry's.
"""

from sagebox.box.embedded_aws.config import EmbeddedAwsConfig

__all__ = ["EmbeddedAwsConfig"]
