"""The serving container's one error root: every error it raises for a reason a caller can act on derives from it."""


class ContainerError(Exception):
    """A model, setting or request the serving container cannot use (each message is one readable line)."""
