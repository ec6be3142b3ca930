"""Which compute source defines each kernel, read from the compiler's symbol table (`nm -C`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from neuron_emu.errors import CustomOpBuildError

_FUNCTION_TYPES = frozenset("TtWw")


@dataclass(frozen=True)
class FunctionSymbol:
    name: str
    parameters: str
    weak: bool


def _split_name(demangled: str) -> tuple[str, str] | None:
    depth = 0
    for i, c in enumerate(demangled):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            head = demangled[:i].strip()
            name = head.rsplit(" ", 1)[-1]
            return name, demangled[i:]
    return None


def parse_nm(output: str) -> list[FunctionSymbol]:
    """Function definitions in `nm -C --defined-only` output."""
    symbols: list[FunctionSymbol] = []
    for line in output.splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or parts[1] not in _FUNCTION_TYPES:
            continue
        demangled = parts[2].strip()
        if " [clone " in demangled:  # compiler-made copies (.cold, .isra, .constprop) of a function
            continue
        split = _split_name(demangled)
        if split is None:
            continue
        name, parameters = split
        symbols.append(FunctionSymbol(name=name, parameters=parameters, weak=parts[1] in "Ww"))
    return symbols


def locate_kernels(kernels: Sequence[str], symbols: Mapping[str, list[FunctionSymbol]]) -> dict[str, str]:
    """Map each kernel name to the one compute source (name) that defines it."""
    located: dict[str, str] = {}
    for kernel in kernels:
        strong = [(src, s) for src, syms in symbols.items() for s in syms if s.name == kernel and not s.weak]
        weak = [(src, s) for src, syms in symbols.items() for s in syms if s.name == kernel and s.weak]
        found = strong or weak[:1]
        if not found:
            sources = ", ".join(symbols) or "(none)"
            raise CustomOpBuildError(
                f"the kernel function '{kernel}' named in NEURON_LIBRARY is not defined in compute_srcs ({sources})"
            )
        if len({s.parameters for _, s in strong}) > 1:
            variants = "; ".join(f"{kernel}{s.parameters} in {src}" for src, s in strong)
            raise CustomOpBuildError(
                f"the kernel function '{kernel}' is overloaded ({variants}); a custom-op kernel needs one definition"
            )
        if len({src for src, _ in strong}) > 1:
            where = ", ".join(sorted({src for src, _ in strong}))
            raise CustomOpBuildError(f"the kernel function '{kernel}' is defined in several compute sources: {where}")
        located[kernel] = found[0][0]
    return located
