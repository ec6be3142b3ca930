"""neuron_emu's stand-ins for `torch_neuronx` and `torch_xla` (not AWS's or Google's packages).

The folders below hold the emulator's own modules for the public names scripts import. They are never
installed under those names: `neuron_emu.runner` resolves the names to these files only while it runs a
script (`python -m neuron_emu run SCRIPT.py`), so a real torch-neuronx or torch-xla is never shadowed
outside that run. Importing `neuron_emu.shims.torch_xla...` directly is not how they are meant to be used.

Every emulated function behaves as on one NeuronCore (world size 1, ordinal 0) whose memory is the host's:
the `xla` device is the CPU. Functions the emulator does not provide fail with one line naming them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

from neuron_emu.errors import NeuronEmuError

SHIM_ROOT = Path(__file__).resolve().parent

# Every public module name the runner resolves to a file under SHIM_ROOT; packages map to their folder.
PACKAGES = (
    "torch_neuronx",
    "torch_neuronx.xla_impl",
    "torch_xla",
    "torch_xla.core",
    "torch_xla.distributed",
)
MODULES = (
    "torch_neuronx.xla_impl.custom_op",
    "torch_xla.core.xla_model",
    "torch_xla.runtime",
    "torch_xla.distributed.parallel_loader",
)
TOP_LEVEL = ("torch_neuronx", "torch_xla")


class NotEmulatedError(NeuronEmuError, NotImplementedError):
    """A documented torch_neuronx / torch_xla function that neuron_emu's stand-in does not provide."""


def provided_modules() -> tuple[str, ...]:
    return tuple(sorted(PACKAGES + MODULES))


def in_namespace(name: str) -> bool:
    """True for `torch_neuronx`, `torch_xla` and every dotted name below them."""
    return any(name == top or name.startswith(top + ".") for top in TOP_LEVEL)


def not_provided(qualified_name: str, *, reason: str = "") -> Callable[..., NoReturn]:
    """A function that raises NotEmulatedError naming `qualified_name` when it is called."""

    def refuse(*_: Any, **__: Any) -> NoReturn:
        detail = f" ({reason})" if reason else ""
        raise NotEmulatedError(f"{qualified_name} is not provided by neuron_emu's emulator{detail}")

    refuse.__name__ = qualified_name.rsplit(".", 1)[-1]
    refuse.__qualname__ = refuse.__name__
    refuse.__doc__ = (
        f"Not provided by neuron_emu's emulator: calling it raises NotEmulatedError.{reason and ' '}{reason}"
    )
    return refuse


def missing_attribute(module: str, name: str, provided: Iterable[str]) -> AttributeError:
    """The error for a name a stand-in module does not define (raised from the module's `__getattr__`)."""
    if name.startswith("__"):  # introspection probes (`__wrapped__`, ...) get Python's usual error
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    public = ", ".join(sorted(n for n in provided if not n.startswith("_")))
    return AttributeError(
        f"{module}.{name} is not provided by neuron_emu's emulator (its stand-in {module} provides: {public})"
    )
