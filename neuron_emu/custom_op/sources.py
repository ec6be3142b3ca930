"""Reading custom-op sources: the NEURON_LIBRARY block and its m.def() calls, checked against the limits."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from neuron_emu.errors import CustomOpBuildError

MAX_FUNCTIONS = 10
RESERVED_LIBRARY_NAMES = frozenset({"builtin"})

_LIBRARY = re.compile(r"\bNEURON_LIBRARY\s*\(\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*\)")
_STRING = r'"((?:[^"\\\n]|\\.)*)"'
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class OpDef:
    op_name: str
    shape_fn: str
    kernel: str
    source: str
    line: int


@dataclass(frozen=True)
class LibraryDecl:
    namespace: str
    source: str
    line: int
    ops: tuple[OpDef, ...]

    @property
    def kernels(self) -> list[str]:
        return sorted({op.kernel for op in self.ops})


def strip_comments(text: str) -> str:
    """Blank out // and /* */ comments, keeping string literals and line numbers intact."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def parse_library(shape_sources: Mapping[str, str]) -> LibraryDecl:
    """The one NEURON_LIBRARY block across the shape sources (file name -> text) and its registrations."""
    blocks: list[tuple[str, int, str, str, str]] = []
    for name, raw in shape_sources.items():
        text = strip_comments(raw)
        for match in _LIBRARY.finditer(text):
            blocks.append((name, _line_of(text, match.start()), match.group(1), match.group(2), text))
    if not blocks:
        files = ", ".join(shape_sources) or "(none)"
        raise CustomOpBuildError(f"no NEURON_LIBRARY(<name>, m) block in shape_srcs ({files})")
    if len(blocks) > 1:
        found = ", ".join(f"{ns} at {src}:{line}" for src, line, ns, _, _ in blocks)
        raise CustomOpBuildError(
            f"shape_srcs define {len(blocks)} NEURON_LIBRARY blocks ({found}); a custom-op library has exactly one"
        )
    source, line, namespace, variable, text = blocks[0]
    where = f"NEURON_LIBRARY({namespace}) at {source}:{line}"
    if namespace in RESERVED_LIBRARY_NAMES:
        raise CustomOpBuildError(f"{where}: the library name '{namespace}' is reserved by Neuron")
    define = re.compile(
        rf"\b{re.escape(variable)}\s*\.\s*def\s*\(\s*{_STRING}\s*,\s*&?\s*([A-Za-z_][\w:]*)\s*,\s*{_STRING}\s*\)"
    )
    calls = list(re.finditer(rf"\b{re.escape(variable)}\s*\.\s*def\s*\(", text))
    ops: list[OpDef] = []
    for call in calls:
        registration = define.match(text, call.start())
        call_line = _line_of(text, call.start())
        if registration is None:
            raise CustomOpBuildError(
                f"{where}: cannot read the {variable}.def(...) call at {source}:{call_line}; write it as "
                f'{variable}.def("op_name", &shape_function, "kernel_function") with string-literal names'
            )
        op_name, shape_fn, kernel = registration.group(1), registration.group(2), registration.group(3)
        ops.append(OpDef(op_name, shape_fn, kernel, source, call_line))
    if not ops:
        raise CustomOpBuildError(f'{where} has no {variable}.def("op_name", &shape_function, "kernel") calls')
    if len(ops) > MAX_FUNCTIONS:
        raise CustomOpBuildError(
            f"{where} registers {len(ops)} functions; a Neuron custom-op library may register at most {MAX_FUNCTIONS}"
        )
    seen: set[str] = set()
    for op in ops:
        if not _IDENTIFIER.fullmatch(op.op_name):
            raise CustomOpBuildError(f'{where}: op name "{op.op_name}" at {op.source}:{op.line} is not a C identifier')
        if not re.fullmatch(r"[A-Za-z_][\w:]*", op.kernel):
            raise CustomOpBuildError(f'{where}: kernel name "{op.kernel}" at {op.source}:{op.line} is not a C++ name')
        if op.op_name in seen:
            raise CustomOpBuildError(f'{where}: op "{op.op_name}" is registered twice')
        seen.add(op.op_name)
    return LibraryDecl(namespace=namespace, source=source, line=line, ops=tuple(ops))


def check_compute_sources(compute_sources: Mapping[str, str]) -> None:
    for name, raw in compute_sources.items():
        match = _LIBRARY.search(strip_comments(raw))
        if match:
            raise CustomOpBuildError(
                f"{name} (a compute source) contains NEURON_LIBRARY({match.group(1)}, ...): "
                "registrations belong in shape_srcs, which run on the host"
            )
