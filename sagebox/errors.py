"""The error type every user-facing failure raises: the CLI prints its message as one line; and which of botocore's
errors are the user's own AWS set-up (pure: imports nothing)."""


class SageboxError(Exception):
    """A failure the user can fix (bad input, missing file, unmet precondition)."""


# botocore's errors about the caller's own AWS set-up: the user's to fix, not Sagebox's (botocore.exceptions names).
_AWS_SETUP_HINTS = {
    "NoCredentialsError": "configure credentials (aws configure, AWS_PROFILE or --profile), or start the local box "
    "with `sagebox up`",
    "PartialCredentialsError": "complete the credentials (aws configure, AWS_PROFILE or --profile)",
    "NoRegionError": "pass --region or set AWS_REGION",
    "ProfileNotFound": "list your profiles with `aws configure list-profiles`",
    "EndpointConnectionError": "check the network, the region and any endpoint URL (AWS_ENDPOINT_URL*)",
    "ConnectTimeoutError": "check the network, the region and any endpoint URL (AWS_ENDPOINT_URL*)",
    "TokenRetrievalError": "log in again (aws sso login)",
    "SSOTokenLoadError": "log in again (aws sso login)",
}


def aws_setup_error(exc: BaseException) -> str | None:
    """One line for a botocore error the user's AWS configuration caused, else None (matched by module and class
    name, so the CLI never imports botocore to check)."""
    if not type(exc).__module__.startswith("botocore"):
        return None
    hint = _AWS_SETUP_HINTS.get(type(exc).__name__)
    return None if hint is None else f"AWS: {exc}: {hint}"
