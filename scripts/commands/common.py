"""Helpers shared by the command modules (consoles, defaults)."""

from __future__ import annotations

from rich.console import Console


def console() -> Console:
    return Console()


def err_console() -> Console:
    return Console(stderr=True)


def default_threads() -> int:
    from container.env import available_cpus

    return available_cpus()
