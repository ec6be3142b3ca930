"""The error types the CDK app raises for problems a user can fix; each message is one readable line."""


class InfraError(ValueError):
    """A target, model artifact or setting the CDK app cannot use."""


class TargetError(InfraError):
    """A deployment target that is malformed or cannot run where it is placed."""


class MissingArtifact(TargetError):
    """A target's local model artifact is not there (yet): the CDK app still synthesizes the rest (`cdk bootstrap`
    needs no model), and that target's stack carries the error, so deploying it fails with this line."""
