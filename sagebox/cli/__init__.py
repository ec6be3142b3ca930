"""The `sagebox` CLI: one module per subcommand, each exposing `register(subparsers)`; `main` parses and runs."""

from sagebox.cli.app import main, run_command

__all__ = ["main", "run_command"]
