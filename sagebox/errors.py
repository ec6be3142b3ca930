"""The error type every user-facing failure raises: the CLI prints its message as one line."""


class SageboxError(Exception):
    """A failure the user can fix (bad input, missing file, unmet precondition)."""
