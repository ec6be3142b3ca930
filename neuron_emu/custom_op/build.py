"""`custom_op.load`: build unmodified Neuron custom-op sources into `lib<name>.so`, cached by source hash.

A library links five kinds of objects:
  - the compute sources, compiled against neuron_emu's NeuronCore headers (`include/`); a source that
    defines kernels is compiled through a generated wrapper that includes it and records each kernel's
    exact signature;
  - the shape sources with their NEURON_LIBRARY block;
  - a generated index of the kernels;
  - the emulator runtime (`csrc/runtime.cpp`) and the torch bridge (`csrc/bridge.cpp`), built once, cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from neuron_emu.custom_op.library import load_library
from neuron_emu.custom_op.sources import LibraryDecl, check_compute_sources, parse_library, strip_comments
from neuron_emu.custom_op.symbols import locate_kernels, parse_nm
from neuron_emu.custom_op.toolchain import (
    CommandFailed,
    Toolchain,
    compile_object,
    defined_symbols,
    file_lock,
    find_toolchain,
    first_error,
    link_shared,
)
from neuron_emu.errors import CustomOpBuildError
from neuron_emu.paths import CSRC_DIR, INCLUDE_DIR, cache_root

GENERATOR_VERSION = "1"
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".hxx", ".inc", ".ipp")
USER_FLAGS = (
    "-std=c++17",
    "-O2",
    "-fPIC",
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
    "-DNEURON_EMU=1",
)
_LIBRARY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class TorchInfo:
    version: str
    include_dirs: tuple[Path, ...]
    lib_dir: Path
    cxx11_abi: bool


@cache
def torch_info() -> TorchInfo:
    import torch

    root = Path(torch.__file__).resolve().parent
    return TorchInfo(
        version=torch.__version__,
        include_dirs=(root / "include", root / "include" / "torch" / "csrc" / "api" / "include"),
        lib_dir=root / "lib",
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    )


def _digest(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


@cache
def shim_digest() -> str:
    """Hash of every header and runtime source neuron_emu compiles into a library."""
    files = sorted([*INCLUDE_DIR.rglob("*"), *CSRC_DIR.glob("*.cpp")])
    return _digest(part for f in files if f.is_file() for part in (str(f.relative_to(f.parents[1])), f.read_bytes()))


def _user_flags() -> list[str]:
    return [*USER_FLAGS, f"-I{INCLUDE_DIR}"]


def _bridge_flags(info: TorchInfo) -> list[str]:
    flags = ["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden", "-w"]
    flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(info.cxx11_abi)}")
    flags += [f"-isystem{d}" for d in info.include_dirs]
    flags.append(f"-I{INCLUDE_DIR}")
    return flags


def _cached_object(
    name: str, source: Path, flags: list[str], extra_key: Sequence[str], *, verbose: bool, log: list[str]
) -> Path:
    toolchain = find_toolchain()
    key = _digest([GENERATOR_VERSION, name, toolchain.version, *flags, *extra_key, shim_digest()])[:20]
    objects = cache_root() / "objects"
    output = objects / f"{name}-{key}.o"
    if output.exists():
        return output
    with file_lock(objects / f".{name}-{key}.lock"):
        if not output.exists():
            compile_object(toolchain, source, output, flags, verbose=verbose, log=log)
    return output


def runtime_object(*, verbose: bool, log: list[str]) -> Path:
    return _cached_object("runtime", CSRC_DIR / "runtime.cpp", _user_flags(), [], verbose=verbose, log=log)


def bridge_object(*, verbose: bool, log: list[str]) -> Path:
    info = torch_info()
    flags = _bridge_flags(info)
    return _cached_object("bridge", CSRC_DIR / "bridge.cpp", flags, [info.version], verbose=verbose, log=log)


@dataclass(frozen=True)
class BuildPlan:
    name: str
    compute_srcs: tuple[Path, ...]
    shape_srcs: tuple[Path, ...]
    multicore: bool
    extra_cflags: tuple[str, ...]
    library: LibraryDecl
    key: str

    @property
    def build_dir(self) -> Path:
        return cache_root() / "libs" / f"{self.name}-{self.key[:16]}"

    @property
    def library_path(self) -> Path:
        return self.build_dir / f"lib{self.name}.so"


def _resolve_sources(role: str, sources: Sequence[str | os.PathLike[str]]) -> tuple[Path, ...]:
    if isinstance(sources, str | os.PathLike) or not sources:
        raise CustomOpBuildError(f"{role} must be a non-empty list of source files")
    resolved: list[Path] = []
    for src in sources:
        path = Path(src).expanduser().resolve()
        if not path.is_file():
            raise CustomOpBuildError(f"{role} file {src} does not exist")
        resolved.append(path)
    names = [p.name for p in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise CustomOpBuildError(f"{role} lists {', '.join(duplicates)} more than once")
    return tuple(resolved)


def _neighbour_headers(sources: Iterable[Path]) -> list[Path]:
    headers: set[Path] = set()
    for directory in {src.parent for src in sources}:
        headers.update(p for p in directory.iterdir() if p.is_file() and p.suffix in HEADER_SUFFIXES)
    return sorted(headers)


def plan_build(
    name: str,
    compute_srcs: Sequence[str | os.PathLike[str]],
    shape_srcs: Sequence[str | os.PathLike[str]],
    multicore: bool,
    extra_cflags: Sequence[str] | None,
) -> BuildPlan:
    if not isinstance(name, str) or not _LIBRARY_NAME.fullmatch(name):
        raise CustomOpBuildError(f"library name {name!r} must be letters, digits, '_', '.' or '-'")
    if extra_cflags is not None and (
        isinstance(extra_cflags, str) or not all(isinstance(f, str) for f in extra_cflags)
    ):
        raise CustomOpBuildError("extra_cflags must be a list of strings, e.g. ['-DSTACK_SIZE=20000']")
    compute = _resolve_sources("compute_srcs", compute_srcs)
    shape = _resolve_sources("shape_srcs", shape_srcs)
    overlap = sorted({p.name for p in compute} & {p.name for p in shape})
    if overlap:
        raise CustomOpBuildError(f"{', '.join(overlap)} is listed in both compute_srcs and shape_srcs")
    check_compute_sources({p.name: p.read_text(errors="replace") for p in compute})
    library = parse_library({p.name: p.read_text(errors="replace") for p in shape})
    flags = tuple(extra_cflags or ())
    parts: list[bytes | str] = [GENERATOR_VERSION, name, str(bool(multicore)), *flags, shim_digest()]
    parts += [find_toolchain().version, torch_info().version]
    for role, paths in (
        ("compute", compute),
        ("shape", shape),
        ("header", tuple(_neighbour_headers(compute + shape))),
    ):
        for path in paths:
            parts += [role, path.name, path.read_bytes()]
    return BuildPlan(
        name=name,
        compute_srcs=compute,
        shape_srcs=shape,
        multicore=bool(multicore),
        extra_cflags=flags,
        library=library,
        key=_digest(parts),
    )


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def kernel_wrapper_source(source: Path, kernels: Sequence[tuple[int, str]]) -> str:
    """A translation unit that is the compute source plus the typed entry points of the kernels it defines."""
    lines = [
        "// Generated by neuron_emu: the compute source followed by its kernels' entry points.",
        f"#include {_c_string(str(source))}",
        '#include "nemu/signature.h"',
    ]
    for index, kernel in kernels:
        lines.append(
            f"nemu::detail::FnInfo nemu_kernel_info_{index}() {{ return nemu::detail::kernel_fn_info(&{kernel}); }}"
        )
    return "\n".join(lines) + "\n"


def kernel_index_source(plan: BuildPlan, kernels: Sequence[tuple[int, str, str]]) -> str:
    """The table of kernels (name, source, entry point) the runtime matches NEURON_LIBRARY against."""
    lines = ["// Generated by neuron_emu: the kernels of this library.", '#include "nemu/signature.h"']
    lines += [f"nemu::detail::FnInfo nemu_kernel_info_{index}();" for index, _, _ in kernels]
    entries = ",\n      ".join(
        f"{{{_c_string(kernel)}, {_c_string(source)}, nemu_kernel_info_{index}()}}" for index, kernel, source in kernels
    )
    lines += [
        "namespace nemu {",
        "namespace detail {",
        "const KernelEntry* generated_kernels(size_t* count) {",
        f"  static const KernelEntry entries[] = {{\n      {entries}}};",
        "  *count = sizeof(entries) / sizeof(entries[0]);",
        "  return entries;",
        "}",
        f"int generated_multicore() {{ return {int(plan.multicore)}; }}",
        f"const char* generated_library_file() {{ return {_c_string(plan.library_path.name)}; }}",
        "}  // namespace detail",
        "}  // namespace nemu",
    ]
    return "\n".join(lines) + "\n"


def _link_flags() -> list[str]:
    lib_dir = torch_info().lib_dir
    return [
        f"-L{lib_dir}",
        "-lc10",
        "-ltorch_cpu",
        f"-Wl,-rpath,{lib_dir}",
        "-Wl,-z,defs",
        "-Wl,-Bsymbolic",
    ]


class _Step:
    """A compile step whose failure names the user source it came from."""

    def __init__(self, label: str, future: Future[None]) -> None:
        self.label = label
        self.future = future

    def wait(self) -> None:
        try:
            self.future.result()
        except CommandFailed as exc:
            raise _StepFailed(self.label, exc.output) from None


class _StepFailed(Exception):
    def __init__(self, label: str, output: str) -> None:
        super().__init__(label)
        self.label = label
        self.output = output


def _definition_line(source: Path, kernel: str) -> int:
    """Line of the first mention of `kernel(` in `source` (for error messages only)."""
    text = strip_comments(source.read_text(errors="replace"))
    match = re.search(rf"\b{re.escape(kernel.split('::')[-1])}\s*\(", text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _compile_library(
    plan: BuildPlan, toolchain: Toolchain, remap: dict[str, str], *, verbose: bool, log: list[str]
) -> None:
    build_dir = plan.build_dir
    obj_dir, gen_dir = build_dir / "obj", build_dir / "gen"
    obj_dir.mkdir(parents=True, exist_ok=True)
    gen_dir.mkdir(parents=True, exist_ok=True)
    user_flags = [*_user_flags(), *plan.extra_cflags]

    def flags_for(source: Path) -> list[str]:
        return [*user_flags, f"-I{source.parent}"]

    workers = max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        shared = [
            _Step("the emulator runtime", pool.submit(runtime_object, verbose=verbose, log=log)),  # type: ignore[arg-type]
            _Step("the torch bridge", pool.submit(bridge_object, verbose=verbose, log=log)),  # type: ignore[arg-type]
        ]
        compute_objs = [obj_dir / f"compute{i}_{src.stem}.o" for i, src in enumerate(plan.compute_srcs)]
        shape_objs = [obj_dir / f"shape{i}_{src.stem}.o" for i, src in enumerate(plan.shape_srcs)]
        first = [
            _Step(
                src.name,
                pool.submit(compile_object, toolchain, src, obj, flags_for(src), verbose=verbose, log=log),
            )
            for src, obj in [
                *zip(plan.compute_srcs, compute_objs, strict=True),
                *zip(plan.shape_srcs, shape_objs, strict=True),
            ]
        ]
        for step in first:
            step.wait()

        symbols = {
            src.name: parse_nm(defined_symbols(toolchain, obj, log=log))
            for src, obj in zip(plan.compute_srcs, compute_objs, strict=True)
        }
        located = locate_kernels(plan.library.kernels, symbols)
        kernels = [(i, kernel, located[kernel]) for i, kernel in enumerate(plan.library.kernels)]

        link_objs: list[Path] = []
        second: list[_Step] = []
        for src, obj in zip(plan.compute_srcs, compute_objs, strict=True):
            mine = [(i, k) for i, k, where in kernels if where == src.name]
            if not mine:
                link_objs.append(obj)
                continue
            wrapper = gen_dir / f"kernels_{src.stem}.cpp"
            wrapper.write_text(kernel_wrapper_source(src, mine))
            for offset, (_, kernel) in enumerate(mine):  # wrapper line 4 onwards: one entry point per kernel
                remap[f"{wrapper.name}:{4 + offset}"] = f"{src.name}:{_definition_line(src, kernel)}"
            wrapped = obj_dir / f"kernels_{src.stem}.o"
            link_objs.append(wrapped)
            label = f"{src.name} (kernels {', '.join(k for _, k in mine)})"
            second.append(
                _Step(
                    label,
                    pool.submit(compile_object, toolchain, wrapper, wrapped, flags_for(src), verbose=verbose, log=log),
                )
            )
        index = gen_dir / "kernel_index.cpp"
        index.write_text(kernel_index_source(plan, kernels))
        index_obj = obj_dir / "kernel_index.o"
        second.append(
            _Step(
                "the kernel index",
                pool.submit(compile_object, toolchain, index, index_obj, user_flags, verbose=verbose, log=log),
            )
        )
        for step in [*second, *shared]:
            step.wait()

    runtime_o = runtime_object(verbose=verbose, log=log)
    bridge_o = bridge_object(verbose=verbose, log=log)
    objects = [*link_objs, *shape_objs, index_obj, runtime_o, bridge_o]
    try:
        link_shared(toolchain, objects, plan.library_path, _link_flags(), verbose=verbose, log=log)
    except CommandFailed as exc:
        raise _StepFailed("linking", exc.output) from None


def build(plan: BuildPlan, *, verbose: bool = False) -> Path:
    """Build `plan` into its cache directory unless it is already there; returns the library path."""
    if plan.library_path.exists():
        return plan.library_path
    toolchain = find_toolchain()
    plan.build_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(plan.build_dir / ".lock"):
        if plan.library_path.exists():
            return plan.library_path
        log: list[str] = []
        remap: dict[str, str] = {}
        started = time.monotonic()
        log_path = plan.build_dir / "build.log"
        try:
            _compile_library(plan, toolchain, remap, verbose=verbose, log=log)
        except _StepFailed as exc:
            log_path.write_text("\n".join(log) + "\n")
            raise CustomOpBuildError(
                f"building lib{plan.name}.so failed in {exc.label}: "
                f"{first_error(exc.output, (INCLUDE_DIR, plan.build_dir / 'gen'), remap)} "
                f"(full log: {log_path})"
            ) from None
        except CustomOpBuildError:
            log_path.write_text("\n".join(log) + "\n")
            raise
        log_path.write_text("\n".join(log) + "\n")
        info = {
            "name": plan.name,
            "namespace": plan.library.namespace,
            "ops": [op.op_name for op in plan.library.ops],
            "multicore": plan.multicore,
            "compute_srcs": [str(p) for p in plan.compute_srcs],
            "shape_srcs": [str(p) for p in plan.shape_srcs],
            "extra_cflags": list(plan.extra_cflags),
            "key": plan.key,
            "seconds": round(time.monotonic() - started, 3),
        }
        (plan.build_dir / "build.json").write_text(json.dumps(info, indent=2) + "\n")
    return plan.library_path


def _publish(library: Path, build_directory: str | os.PathLike[str]) -> Path:
    directory = Path(build_directory).expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / library.name
    if target.exists() and target.read_bytes() == library.read_bytes():
        return target
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    shutil.copyfile(library, partial)
    os.replace(partial, target)
    return target


def load(
    name: str,
    compute_srcs: Sequence[str | os.PathLike[str]],
    shape_srcs: Sequence[str | os.PathLike[str]],
    build_directory: str | os.PathLike[str] | None = None,
    multicore: bool = False,
    verbose: bool = False,
    extra_cflags: Sequence[str] | None = None,
) -> Path:
    """Build `lib<name>.so` from Neuron custom-op sources (cached by source hash) and load it here.

    With `build_directory` the library is also written there (for `load_library` in other processes).
    Returns the path of the library file.
    """
    plan = plan_build(name, compute_srcs, shape_srcs, multicore, extra_cflags)
    library = build(plan, verbose=verbose)
    load_library(library)
    if build_directory is not None:
        return _publish(library, build_directory)
    return library
