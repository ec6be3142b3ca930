"""Stand-in for `torch_neuronx.xla_impl.custom_op`, provided by neuron_emu (not AWS's package).

`load` builds Neuron custom C++ operator sources unchanged with neuron_emu's headers and the host's g++
(the same arguments as AWS's `custom_op.load`), `load_library` loads a built `lib<name>.so`; the ops are then
`torch.ops.<lib>.<op>`. See neuron_emu/README.md, "Custom C++ operators".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neuron_emu.custom_op import LoadedLibrary
from neuron_emu.custom_op import load as _emulated_load
from neuron_emu.custom_op import load_library as _emulated_load_library
from neuron_emu.shims import missing_attribute

__all__ = ["load", "load_library"]


def load(
    name: str,
    compute_srcs: Sequence[str | os.PathLike[str]],
    shape_srcs: Sequence[str | os.PathLike[str]],
    build_directory: str | os.PathLike[str] | None = None,
    multicore: bool = False,
    verbose: bool = False,
    extra_cflags: Sequence[str] | None = None,
) -> Path:
    """Build `lib<name>.so` (written to `build_directory` when given) and load it: neuron_emu.custom_op.load."""
    return _emulated_load(
        name=name,
        compute_srcs=compute_srcs,
        shape_srcs=shape_srcs,
        build_directory=build_directory,
        multicore=multicore,
        verbose=verbose,
        extra_cflags=extra_cflags,
    )


def load_library(library_path: str | os.PathLike[str]) -> LoadedLibrary:
    """Load a built custom-op library, registering `torch.ops.<lib>.<op>`: neuron_emu.custom_op.load_library."""
    return _emulated_load_library(library_path)


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, __all__)
