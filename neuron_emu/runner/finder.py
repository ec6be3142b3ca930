"""Resolve `torch_neuronx` / `torch_xla` imports to neuron_emu's stand-ins, only inside a `with` block.

`shim_imports()` puts a meta-path finder first on `sys.meta_path` and sets aside any module of those names
already imported (a real torch_xla, say); on leaving, it removes the finder and every module of those names
imported inside, and puts back what it set aside, so the stand-ins never outlive the run and a real
torch-neuronx is never shadowed outside it. Names below `torch_neuronx`/`torch_xla` that the emulator does
not provide fail to import with one line (a ModuleNotFoundError, so `except ImportError` fallbacks work).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from neuron_emu import shims


def shim_location(fullname: str) -> tuple[Path, bool] | None:
    """The stand-in file of a public module name, and whether it is a package; None if not emulated."""
    relative = Path(*fullname.split("."))
    if fullname in shims.PACKAGES:
        return shims.SHIM_ROOT / relative / "__init__.py", True
    if fullname in shims.MODULES:
        return shims.SHIM_ROOT / relative.with_suffix(".py"), False
    return None


class ShimFinder(importlib.abc.MetaPathFinder):
    """Finds neuron_emu's stand-in for every module name under `torch_neuronx` and `torch_xla`."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not shims.in_namespace(fullname):
            return None
        location = shim_location(fullname)
        if location is None:
            raise ModuleNotFoundError(
                f"{fullname} is not emulated by neuron_emu (its stand-ins: {', '.join(shims.provided_modules())})",
                name=fullname,
            )
        file, is_package = location
        search = [str(file.parent)] if is_package else None
        return importlib.util.spec_from_file_location(fullname, file, submodule_search_locations=search)


def _shim_names() -> list[str]:
    return [name for name in sys.modules if shims.in_namespace(name)]


@contextmanager
def shim_imports() -> Iterator[ShimFinder]:
    """Inside the block `import torch_neuronx` / `import torch_xla...` give neuron_emu's stand-ins."""
    set_aside = {name: sys.modules.pop(name) for name in _shim_names()}
    finder = ShimFinder()
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        while finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for name in _shim_names():
            del sys.modules[name]
        sys.modules.update(set_aside)
