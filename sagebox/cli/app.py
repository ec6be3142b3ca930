"""`sagebox`: one CLI for every Sagebox step. Heavy imports happen inside each command, never at start-up."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Sequence

from sagebox.errors import SageboxError, aws_setup_error

# Subcommand name -> module under sagebox.cli exposing `register(subparsers)`.
COMMANDS = (
    "serve",
    "quantize",
    "compile",
    "build",
    "evaluate",
    "package",
    "upload",
    "demo_models",
    "invoke",
    "bench",
    "logs",
    "box",
    "shadow",
    "infra",
    "plan",
    "containers",
)

# Loggers of libraries the CLI's users never call, quieted to errors: accelerate imports torchao (in the venv for the
# benchmark's INT8 peers) whenever transformers places weights, and torchao's import then warns that its CUDA
# kernels do not load and torch's pytree that torchao registers enums the old way: lines that opened every
# `make demo` on a CPU machine and said nothing to its user.
QUIET_LOGGERS = ("torchao", "torch.utils._pytree")

EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 70


def _user_errors() -> tuple[type[BaseException], ...]:
    """One error root per product: Sagebox's, the CDK app's, the serving container's (neuron_emu's errors are
    translated into SageboxError where sagebox calls it)."""
    from container.errors import ContainerError
    from infra.errors import InfraError

    return (SageboxError, InfraError, ContainerError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sagebox",
        description="Put PyTorch models (encoders and decoder LLMs) on SageMaker endpoints cheaply and safely.",
    )
    parser.add_argument("--version", action="version", version="sagebox 0.1.0")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"sagebox.cli.{name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_command(lambda: args.func(args))


def run_command(command: Callable[[], int | None]) -> int:
    """Run a command; a user error becomes one line on stderr and exit 1, never a traceback."""
    try:
        result = command()
    except KeyboardInterrupt:
        print("sagebox: interrupted", file=sys.stderr)
        return 130
    except _user_errors() as exc:
        print(f"sagebox: error: {exc}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as exc:
        if os.environ.get("SAGEBOX_DEBUG"):
            raise
        setup = aws_setup_error(exc)
        if setup is not None:
            print(f"sagebox: error: {setup}", file=sys.stderr)
            return EXIT_USER_ERROR
        first = str(exc).splitlines()[0] if str(exc) else ""
        print(
            f"sagebox: internal error: {type(exc).__name__}: {first} (rerun with SAGEBOX_DEBUG=1 for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR
    return int(result or 0)
