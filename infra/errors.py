"""The error types the CDK app raises for problems a user can fix; each message is one readable line."""


class InfraError(ValueError):
    """A target, model artifact or setting the CDK app cannot use."""


class TargetError(InfraError):
    """A deployment target that is malformed or cannot run where it is placed."""
