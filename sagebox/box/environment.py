"""The environment that points AWS SDKs, the CDK CLI and Docker at the box: what `sagebox env` prints and what
`sagebox up` runs the CDK CLI with, so a user's `npx cdk deploy` and the box's own are the same command."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping

from sagebox.box.aws_proxy.routing import PROXY_MARKER, UPSTREAM, no_proxy, upstream_proxy
from sagebox.box.embedded_aws.config import ACCESS_KEY
from sagebox.box.state import BoxState

# Credentials a shell may hold for a real account: unset, so nothing meant for the box reaches AWS.
UNSET = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ROLE_ARN")


# Where clients read a CA bundle from: botocore and the AWS CLI, requests, OpenSSL (Python's ssl, httpx), curl, Node.
CA_VARIABLES = ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS")
# Proxy variables in both spellings: curl reads only the lower-case http_proxy, others prefer upper case.
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def proxy_environment(state: BoxState, shell: Mapping[str, str]) -> dict[str, str]:
    """The AWS proxy in the standard proxy variables, loopback and the shell's own exceptions in NO_PROXY, the
    box's CA bundle in the standard CA variables, and the proxy the shell had before (SAGEBOX_UPSTREAM_PROXY: what
    a box started from this shell passes other hosts through)."""
    if not state.aws_proxy_url:
        return {}
    env = {name: state.aws_proxy_url for name in PROXY_VARIABLES}
    bypass = no_proxy(shell)
    env.update(NO_PROXY=bypass, no_proxy=bypass, **{name: state.ca_bundle for name in CA_VARIABLES})
    env[PROXY_MARKER] = state.aws_proxy_url
    upstream = upstream_proxy(shell)
    if upstream:
        env[UPSTREAM] = upstream
    return env


def box_environment(state: BoxState, shell: Mapping[str, str] | None = None) -> dict[str, str]:
    """What points every client at the box; `shell` (default: this process's environment) is the environment the
    lines are for, whose NO_PROXY and HTTPS proxy are kept."""
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
    env.update(proxy_environment(state, os.environ if shell is None else shell))
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
