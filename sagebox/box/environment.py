"""The environment that points AWS SDKs, the CDK CLI and Docker at the box: what `sagebox env` prints and what
`sagebox up` runs the CDK CLI with, so a user's `npx cdk deploy` and the box's own are the same command."""

from __future__ import annotations

import shlex

from sagebox.box.embedded_aws.config import ACCESS_KEY
from sagebox.box.state import BoxState

# Credentials a shell may hold for a real account: unset, so nothing meant for the box reaches AWS.
UNSET = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN")


def box_environment(state: BoxState) -> dict[str, str]:
    env = {
        # Every AWS SDK (boto3, the CDK CLI's JavaScript SDK) sends every service here...
        "AWS_ENDPOINT_URL": state.aws_url,
        # ...except InvokeEndpoint, which the runtime gateway answers.
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": state.gateway_url,
        "AWS_REGION": state.region,
        "AWS_DEFAULT_REGION": state.region,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": ACCESS_KEY,
        # No instance metadata service here: without this the CDK CLI spends seconds probing for one.
        "AWS_EC2_METADATA_DISABLED": "true",
        # A user's `npx cdk deploy` into the box accepts emulated Neuron models, as the box's own deploys do
        # (infra/settings.py: the allow_emulated context key).
        "SAGEBOX_ALLOW_EMULATED": "1",
    }
    if state.docker_host:
        env["DOCKER_HOST"] = state.docker_host
    if state.base_image:
        env["SAGEBOX_BASE_IMAGE"] = state.base_image
    if state.wheelhouse:
        env["SAGEBOX_WHEELHOUSE"] = state.wheelhouse
    return env


def shell_lines(state: BoxState) -> list[str]:
    lines = [
        '# SageMaker in a box: AWS SDKs, the CDK CLI and Docker talk to it after eval "$(sagebox env)"',
        f"unset {' '.join(UNSET)}",
    ]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in box_environment(state).items()]
    if not state.docker_host:
        lines.append(
            "# no container engine in this box (process mode): `cdk deploy` of an image asset needs "
            "`sagebox up --containers`, or -c image_uri=..."
        )
    return lines
