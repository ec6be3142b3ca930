"""The host C++ toolchain: compiling, linking and reading symbols, with one-line error reports."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from neuron_emu.errors import CustomOpBuildError


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    nm: str
    version: str


class CommandFailed(Exception):
    def __init__(self, command: Sequence[str], output: str) -> None:
        super().__init__(output)
        self.command = list(command)
        self.output = output


@cache
def find_toolchain() -> Toolchain:
    cxx = shutil.which(os.environ.get("CXX", "") or "g++") or shutil.which("c++")
    nm = shutil.which("nm")
    if cxx is None or nm is None:
        raise CustomOpBuildError("building custom ops needs a C++ compiler (g++) and nm (binutils) on PATH")
    result = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    version = (result.stdout or result.stderr).splitlines()[0] if (result.stdout or result.stderr) else cxx
    return Toolchain(cxx=cxx, nm=nm, version=version)


def run(command: Sequence[str], *, verbose: bool, log: list[str]) -> str:
    log.append("$ " + " ".join(command))
    if verbose:
        print(" ".join(command), file=sys.stderr)
    env = {**os.environ, "LC_ALL": "C"}  # plain ASCII diagnostics
    result = subprocess.run(list(command), capture_output=True, text=True, check=False, env=env)
    output = (result.stdout or "") + (result.stderr or "")
    if output:
        log.append(output.rstrip())
        if verbose:
            print(output.rstrip(), file=sys.stderr)
    if result.returncode != 0:
        raise CommandFailed(command, output)
    return result.stdout or ""


def compile_object(
    toolchain: Toolchain, source: Path, output: Path, flags: Sequence[str], *, verbose: bool, log: list[str]
) -> None:
    partial = output.with_name(f"{output.name}.tmp-{os.getpid()}")
    run([toolchain.cxx, *flags, "-c", str(source), "-o", str(partial)], verbose=verbose, log=log)
    os.replace(partial, output)


def link_shared(
    toolchain: Toolchain,
    objects: Sequence[Path],
    output: Path,
    ldflags: Sequence[str],
    *,
    verbose: bool,
    log: list[str],
) -> None:
    partial = output.with_name(f"{output.name}.tmp-{os.getpid()}")
    run(
        [toolchain.cxx, "-shared", "-o", str(partial), *map(str, objects), *ldflags],
        verbose=verbose,
        log=log,
    )
    os.replace(partial, output)


def defined_symbols(toolchain: Toolchain, obj: Path, *, log: list[str]) -> str:
    return run([toolchain.nm, "-C", "--defined-only", str(obj)], verbose=False, log=[])


_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:\d+:)?\s*(?P<kind>fatal error|error):\s*(?P<msg>.*)$")
_REQUIRED_FROM = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+:\s+required from here")
_LINKER = re.compile(r"undefined reference to [`'](?P<sym>[^']+)'")


def first_error(output: str, internal: Sequence[Path] = (), remap: Mapping[str, str] | None = None) -> str:
    """The most telling compiler/linker diagnostic in `output`, as `file:line: message`.

    A static assertion inside neuron_emu's headers (`internal`) is reported at the user line behind it;
    `remap` turns locations in generated files into the user lines they stand for.
    """
    lines = output.splitlines()
    inside = tuple(str(p) for p in internal)
    diagnostics = [m for m in map(_DIAGNOSTIC.match, lines) if m]
    chosen = next((m for m in diagnostics if "static assertion failed" in m.group("msg")), None)
    if chosen is None and diagnostics:
        chosen = diagnostics[0]
    if chosen is not None:
        where = f"{Path(chosen.group('file')).name}:{chosen.group('line')}"
        if inside and chosen.group("file").startswith(inside):
            frames = [m for m in map(_REQUIRED_FROM.match, lines) if m]
            users = [m for m in frames if not m.group("file").startswith(inside)]
            if users:
                where = f"{Path(users[-1].group('file')).name}:{users[-1].group('line')}"
            elif frames and remap:
                generated = f"{Path(frames[-1].group('file')).name}:{frames[-1].group('line')}"
                where = remap.get(generated, where)
        return f"{where}: {chosen.group('msg')}"
    linker = _LINKER.search(output)
    if linker:
        return f"undefined reference to {linker.group('sym')}"
    text = [line.strip() for line in lines if line.strip()]
    return text[0] if text else "the compiler failed without a message"


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process building into the same cache entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
