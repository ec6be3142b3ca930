"""Stand-in for `torch_xla`, provided by neuron_emu (not Google's or AWS's package).

Resolved under the name `torch_xla` only inside `python -m neuron_emu run SCRIPT.py`. The emulated XLA
device is the CPU of one NeuronCore-like process (world size 1): `torch_xla.device()` is the CPU device and
`torch_xla.sync()` is `xm.mark_step()`. The submodules emulated are `torch_xla.core.xla_model`,
`torch_xla.runtime` and `torch_xla.distributed.parallel_loader`; importing any other fails with one line.
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_emu.shims import missing_attribute

from .core import xla_model as _xm

__all__ = ["device", "device_count", "devices", "manual_seed", "sync"]


def device(index: int | None = None) -> torch.device:
    """torch_xla.device: the emulated XLA device, which is the CPU."""
    return _xm.xla_device(index)


def devices() -> list[torch.device]:
    """torch_xla.devices: the one emulated device."""
    return [_xm.xla_device()]


def device_count() -> int:
    """torch_xla.device_count: one addressable device per process, as with one NeuronCore per process."""
    return 1


def sync(wait: bool = False, reset_scope: bool = True) -> None:
    """torch_xla.sync: a step boundary, as `xm.mark_step()`."""
    _xm.mark_step(wait=wait, reset_scope=reset_scope)


def manual_seed(seed: int, device: Any = None) -> None:
    """torch_xla.manual_seed: seeds the emulated device's generator, which is torch's CPU generator."""
    _xm.set_rng_state(seed, device)


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, [*__all__, "core", "runtime", "distributed"])
