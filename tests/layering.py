"""The project's dependency rules, read from the code's own imports (ast): which package may import which.

    neuron_emu  -> nothing of the project (a product of its own)
    container   -> neuron_emu only (the serving image ships container/ and neuron_emu/ alone)
    infra       -> container, neuron_emu (never the CLI's package)
    sagebox     -> infra, container, neuron_emu
    scripts     -> sagebox, infra, container, neuron_emu (runnable wrappers; nothing imports them)
    tests       -> anything; nothing outside tests imports tests

Inside sagebox, the build pipeline's stages (sagebox/pipeline/<stage>/) depend one way, in the order a build runs
(PIPELINE_STAGES): a stage imports only itself and the stages before it, never the orchestration on top of them
(sagebox/pipeline/*.py); and nothing under sagebox/pipeline imports the rest of sagebox beyond PIPELINE_SHARED: not
the demo's kitchen (sagebox.demo), the CLI, the box, the benchmarks or the images.

Imports inside functions count too (a deferred import is still a dependency), and so they do for cycles: no two
modules may import each other, whether at module level or deferred inside a function (a deferred import only moves
the circle to run time). Imports under `if TYPE_CHECKING:` are for the type checker alone and count for neither.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("neuron_emu", "container", "infra", "sagebox", "scripts", "tests")
ALLOWED: Mapping[str, frozenset[str]] = {
    "neuron_emu": frozenset(),
    "container": frozenset({"neuron_emu"}),
    "infra": frozenset({"container", "neuron_emu"}),
    "sagebox": frozenset({"infra", "container", "neuron_emu"}),
    "scripts": frozenset({"sagebox", "infra", "container", "neuron_emu"}),
    "tests": frozenset(PACKAGES) - {"scripts"},
}

PIPELINE = "sagebox.pipeline"
PIPELINE_STAGES = ("load", "data", "export", "quantize", "gate", "compile", "package")
PIPELINE_SHARED = frozenset({"sagebox.errors", "sagebox.paths"})


@dataclass(frozen=True)
class Import:
    module: str  # the importing module (dotted)
    target: str  # the imported module (dotted, absolute)
    line: int
    top_level: bool  # executed at import time (not inside a function or `if TYPE_CHECKING`)
    type_only: bool = False  # under `if TYPE_CHECKING:`: never executed


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(source: str, module: str, is_package: bool = False) -> Iterator[Import]:
    tree = ast.parse(source)

    def visit(node: ast.AST, top: bool, type_only: bool = False) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, child.lineno, top, type_only)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".") if is_package else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    # `from pkg import sub` may name a submodule: record both; the checker keeps project modules.
                    name = f"{base}.{alias.name}" if alias.name != "*" else base
                    yield Import(module, name, child.lineno, top, type_only)
                    yield Import(module, base, child.lineno, top, type_only)
            elif isinstance(child, ast.If) and _type_checking(child):
                yield from visit(child, False, True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, False, type_only)
            else:
                yield from visit(child, top, type_only)

    yield from visit(tree, True)


def project_files(root: Path) -> Iterator[Path]:
    for package in PACKAGES:
        base = root / package
        if base.is_dir():
            yield from (p for p in sorted(base.rglob("*.py")) if "__pycache__" not in p.parts)


def all_imports(root: Path, files: Iterable[Path]) -> list[Import]:
    found: list[Import] = []
    for path in files:
        module = module_name(root, path)
        found += imports_of(path.read_text(), module, path.name == "__init__.py")
    return found


def forbidden(imports: Iterable[Import]) -> list[str]:
    """Every import that breaks ALLOWED, as `module:line imports target`."""
    broken = []
    for item in imports:
        source, target = item.module.split(".")[0], item.target.split(".")[0]
        if target not in PACKAGES or source == target:
            continue
        if target not in ALLOWED[source]:
            broken.append(f"{item.module}:{item.line} imports {item.target}")
    return sorted(set(broken))


def cycles(imports: Iterable[Import], modules: set[str], deferred: bool = False) -> list[list[str]]:
    """Cycles among the project's modules through top-level imports, or with `deferred` through every executed
    import, those inside functions included (each cycle once). A package's own modules importing their package
    (`from sagebox.box import x` records `sagebox.box` too) is no cycle of the code's design: an edge from a module
    to a package that contains it is left out."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for item in imports:
        if item.type_only or not (item.top_level or deferred):
            continue
        if item.target in modules and item.target != item.module and not item.module.startswith(item.target + "."):
            graph[item.module].add(item.target)
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return found


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _stage(name: str) -> int | None:
    """The index of the pipeline stage a module is in, or None for the orchestration (and the package itself)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[2] in PIPELINE_STAGES:
        return PIPELINE_STAGES.index(parts[2])
    return None


def pipeline_breaches(imports: Iterable[Import]) -> list[str]:
    """Every import from inside sagebox.pipeline that breaks its rooms' rules, as `module:line imports target (why)`."""
    broken = []
    for item in imports:
        source, target = item.module, item.target
        if not _inside(source, PIPELINE) or not _inside(target, "sagebox"):
            continue
        if not _inside(target, PIPELINE):
            if target != "sagebox" and not any(_inside(target, shared) for shared in PIPELINE_SHARED):
                broken.append(f"{source}:{item.line} imports {target} (the pipeline imports no other part of sagebox)")
            continue
        here, there = _stage(source), _stage(target)
        if here is None or target == PIPELINE:
            continue  # the orchestration may use every stage
        if there is None:
            broken.append(f"{source}:{item.line} imports {target} (a stage never imports the orchestration)")
        elif there > here:
            later = PIPELINE_STAGES[there]
            broken.append(f"{source}:{item.line} imports {target} ({later} runs after {PIPELINE_STAGES[here]})")
    return sorted(set(broken))
