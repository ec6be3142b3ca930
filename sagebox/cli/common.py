"""Helpers shared by the command modules (consoles, defaults)."""

from __future__ import annotations

import sys

from rich.console import Console

# Tables wider than a default 80-column pipe: logs and CI output keep every column readable.
PIPE_WIDTH = 160


def console() -> Console:
    return Console(width=None if sys.stdout.isatty() else PIPE_WIDTH)


def err_console() -> Console:
    return Console(stderr=True, width=None if sys.stderr.isatty() else PIPE_WIDTH)


def default_threads() -> int:
    from container.env import available_cpus

    return available_cpus()
