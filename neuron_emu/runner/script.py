"""Run a torch-neuronx script unchanged: stand-in modules, the `xla` device on the CPU, `__main__` semantics.

`run_script(path, args)` runs the file as `python path args...` would (`runpy.run_path` under the name
`__main__`, `sys.argv` = [path, *args], the script's folder first on `sys.path`) with `torch_neuronx` and
`torch_xla` resolving to neuron_emu's stand-ins and every XLA device argument meaning the CPU. Afterwards,
also on an exception or `SystemExit`, it restores `sys.argv`, `sys.path`, the import system and the torch
function mode stack, and drops the modules the script imported from its own folder, so nothing of the run
stays in the process.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from neuron_emu.errors import NeuronEmuError
from neuron_emu.runner.device import XlaOnCpu
from neuron_emu.runner.finder import shim_imports


class RunnerError(NeuronEmuError):
    """The runner cannot start the script (the user's command line, not the script, is at fault)."""


def resolve_script(path: str | os.PathLike[str]) -> Path:
    """The absolute path of an existing script file, or RunnerError."""
    script = Path(path).expanduser()
    if not script.exists():
        raise RunnerError(f"script {path} does not exist")
    if not script.is_file():
        raise RunnerError(f"script {path} is not a file")
    return script.resolve()


def exit_status(code: object) -> int:
    """The process status Python gives `sys.exit(code)`: None is 0, an int itself, anything else 1."""
    if code is None:
        return 0
    if isinstance(code, bool | int):
        return int(code)
    return 1


def _under(path: str | None, folder: Path) -> bool:
    if not path:
        return False
    try:
        return Path(path).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _script_modules(before: set[str], folder: Path) -> list[str]:
    """Modules first imported during the run whose top-level package was found in the script's folder."""
    new = [name for name in sys.modules if name not in before]
    tops = {name for name in new if "." not in name and _under(getattr(sys.modules[name], "__file__", None), folder)}
    return [name for name in new if name.split(".", 1)[0] in tops]


@contextmanager
def script_environment(script: Path, args: Sequence[str]) -> Iterator[None]:
    """`sys.argv`, `sys.path`, stand-in imports and the XLA-on-CPU mode for the run; all restored on exit."""
    folder = script.parent
    saved_argv = sys.argv
    saved_path = list(sys.path)
    cached_finder = str(folder) in sys.path_importer_cache
    before = set(sys.modules)
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(folder))
    try:
        with shim_imports(), XlaOnCpu():
            yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        if not cached_finder:
            sys.path_importer_cache.pop(str(folder), None)
        for name in _script_modules(before, folder):
            del sys.modules[name]


def run_script(path: str | os.PathLike[str], args: Sequence[str] = ()) -> int:
    """Run a script as `__main__` under the emulator and return its exit status.

    `sys.exit(...)` inside the script becomes the returned status (a non-int message is printed to stderr, as
    Python does, and gives 1). Exceptions the script raises propagate after the environment is restored.
    """
    script = resolve_script(path)
    with script_environment(script, args):
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exc:
            if exc.code is not None and not isinstance(exc.code, bool | int):
                print(exc.code, file=sys.stderr)
            return exit_status(exc.code)
    return 0


def script_traceback(exc: BaseException, script: Path) -> str:
    """The exception's traceback from the script's first frame on (the runner's own frames left out).

    When no frame is the script's (a syntax error: the script never started), only the exception, as Python
    prints it for `python SCRIPT.py`.
    """
    tb: TracebackType | None = exc.__traceback__
    target = str(script)
    while tb is not None and tb.tb_frame.f_code.co_filename != target:
        tb = tb.tb_next
    if tb is None:
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, tb))
