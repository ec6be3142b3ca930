"""Neuron custom C++ operators on a CPU: `load()` builds them, `load_library()` loads a built library."""

from neuron_emu.custom_op.build import load
from neuron_emu.custom_op.library import LoadedLibrary, load_library, loaded_libraries

__all__ = ["LoadedLibrary", "load", "load_library", "loaded_libraries"]
