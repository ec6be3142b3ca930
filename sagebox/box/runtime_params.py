"""The SageMaker runtime's request-parameter constraints, checked as the service checks them, before anything else.

SageMaker answers a header that breaks its API's constraints with 400 `ValidationError` and never reaches the
container: CustomAttributes longer than 1024 characters or not ASCII, an InferenceId of more than 64, a TargetVariant
that is not a name. The constraints are those of the API reference, "Request Syntax" and "URI Request Parameters" of
https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html (and of
API_runtime_InvokeEndpointAsync.html, API_runtime_InvokeEndpointWithResponseStream.html); botocore's service model
carries the same ones and tests/sagebox/box/test_runtime_params.py checks this table against it. Pure logic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Constraint:
    member: str  # the API's member name; messages name it in lower camel case, as AWS's do
    header: str
    max_length: int
    min_length: int = 0
    pattern: str | None = None  # Python regex, matched against the whole value
    integer: tuple[int, int] | None = None  # bounds of an integer member

    def problem(self, value: str) -> str | None:
        if self.integer is not None:
            low, high = self.integer
            if not re.fullmatch(r"-?[0-9]{1,12}", value):
                return "Member must be an integer"
            number = int(value)
            if number < low:
                return f"Member must have value greater than or equal to {low}"
            if number > high:
                return f"Member must have value less than or equal to {high}"
            return None
        if len(value) > self.max_length:
            return f"Member must have length less than or equal to {self.max_length}"
        if len(value) < self.min_length:
            return f"Member must have length greater than or equal to {self.min_length}"
        if self.pattern is not None and not re.fullmatch(self.pattern, value, flags=re.DOTALL):
            return f"Member must satisfy regular expression pattern: {self.pattern}"
        return None


# The API's Java patterns in Python: \p{ASCII} is [\x00-\x7f]; \p{Print} is printable ASCII, [\x20-\x7e].
_ASCII = r"[\x00-\x7f]*"
_NAME = r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"
_ID = r"\S[\x20-\x7e]*"


def _common(content_type: str, accept: str) -> tuple[Constraint, ...]:
    return (
        Constraint("ContentType", content_type, 1024, pattern=_ASCII),
        Constraint("Accept", accept, 1024, pattern=_ASCII),
        Constraint("CustomAttributes", "X-Amzn-SageMaker-Custom-Attributes", 1024, pattern=_ASCII),
        Constraint("InferenceId", "X-Amzn-SageMaker-Inference-Id", 64, 1, pattern=_ID),
    )


# The members InvokeEndpoint and InvokeEndpointWithResponseStream share (SessionId's pattern differs between them).
_TARGETING = (
    Constraint("PrefixAwareId", "X-Amzn-SageMaker-Prefix-Aware-Id", 64, 1, pattern=_ID),
    Constraint("TargetVariant", "X-Amzn-SageMaker-Target-Variant", 63, pattern=_NAME),
    Constraint("TargetContainerHostname", "X-Amzn-SageMaker-Target-Container-Hostname", 63, pattern=_NAME),
    Constraint(
        "InferenceComponentName",
        "X-Amzn-SageMaker-Inference-Component",
        63,
        pattern=r"[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?",
    ),
)
INVOKE_ENDPOINT = (
    *_common("Content-Type", "Accept"),
    *_TARGETING,
    Constraint("SessionId", "X-Amzn-SageMaker-Session-Id", 256, pattern=rf"NEW_SESSION|{_NAME}"),
    Constraint("TargetModel", "X-Amzn-SageMaker-Target-Model", 1024, 1, pattern=_ID),
    Constraint("EnableExplanations", "X-Amzn-SageMaker-Enable-Explanations", 64, 1),
)
INVOKE_ENDPOINT_WITH_RESPONSE_STREAM = (
    *_common("Content-Type", "X-Amzn-SageMaker-Accept"),
    *_TARGETING,
    Constraint("SessionId", "X-Amzn-SageMaker-Session-Id", 256, pattern=_NAME),
)
INVOKE_ENDPOINT_ASYNC = (
    *_common("X-Amzn-SageMaker-Content-Type", "X-Amzn-SageMaker-Accept"),
    Constraint("InputLocation", "X-Amzn-SageMaker-InputLocation", 1024, 1, pattern=r"(https|s3)://([^/]+)/?(.*)"),
    Constraint(
        "S3OutputPathExtension",
        "X-Amzn-SageMaker-S3OutputPathExtension",
        512,
        1,
        pattern=r"(?!s3:|https:)[a-zA-Z0-9!_.*'()/-]+",
    ),
    Constraint("Filename", "X-Amzn-SageMaker-Filename", 32, 1, pattern=r"(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9-_.]*"),
    Constraint("RequestTTLSeconds", "X-Amzn-SageMaker-RequestTTLSeconds", 0, integer=(60, 21600)),
    Constraint("InvocationTimeoutSeconds", "X-Amzn-SageMaker-InvocationTimeoutSeconds", 0, integer=(1, 3600)),
)
ENDPOINT_NAME = Constraint("EndpointName", "", 63, pattern=_NAME)


def validation_message(
    endpoint_name: str, headers: Mapping[str, str], constraints: tuple[Constraint, ...]
) -> str | None:
    """AWS's message for the parameters that break their constraints ("1 validation error detected: Value 'x' at
    'customAttributes' failed to satisfy constraint: ..."), or None when every one holds. `headers` is looked up
    case-insensitively by lower-case name (as Starlette's Headers are)."""
    errors = []
    for constraint, value in [(ENDPOINT_NAME, endpoint_name)] + [
        (c, headers[c.header.lower()]) for c in constraints if c.header.lower() in headers
    ]:
        problem = constraint.problem(value)
        if problem is not None:
            member = constraint.member[0].lower() + constraint.member[1:]
            shown = value if len(value) <= 64 else value[:64] + "..."
            errors.append(f"Value '{shown}' at '{member}' failed to satisfy constraint: {problem}")
    if not errors:
        return None
    count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
    return f"{count}: " + "; ".join(errors)
