"""neuron_emu's command line: `python -m neuron_emu <command> ...`.

Commands:
  run SCRIPT.py [ARGS...]   run a script written for torch-neuronx / torch-xla unchanged on the CPU
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

PROG = "python -m neuron_emu"
USAGE_STATUS = 2
INTERRUPTED_STATUS = 130


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors are one line on stderr (`--help` still prints the full help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_STATUS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _run(args: argparse.Namespace) -> int:
    from neuron_emu.runner import RunnerError, resolve_script, run_script, script_traceback

    try:
        script = resolve_script(args.script)
    except RunnerError as exc:
        print(f"{PROG} run: error: {exc}", file=sys.stderr)
        return USAGE_STATUS
    try:
        return run_script(script, args.args)
    except KeyboardInterrupt as exc:
        sys.stderr.write(script_traceback(exc, script))
        return INTERRUPTED_STATUS
    except Exception as exc:  # the script's own error: show its traceback, as `python SCRIPT.py` would
        sys.stderr.write(script_traceback(exc, script))
        return 1


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"run": _run}


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog=PROG, description="neuron_emu: the Inferentia2/Trainium workflow on a CPU.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_OneLineParser)
    run = commands.add_parser(
        "run",
        help="run a torch-neuronx script unchanged on the CPU",
        description=(
            "Run SCRIPT.py as `python SCRIPT.py ARGS` would, with torch_neuronx, torch_neuronx.xla_impl.custom_op, "
            "torch_xla and torch_xla.core.xla_model resolving to neuron_emu's stand-ins (only during the run) and "
            "the 'xla' device mapped to the CPU. Exits with the script's status."
        ),
    )
    run.add_argument("script", help="the Python script to run")
    script_args = run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    script_args.required = False  # argparse marks REMAINDER positionals required; a script may take none
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
