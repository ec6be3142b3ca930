"""Stand-in for `torch_xla.distributed.parallel_loader`, provided by neuron_emu (not Google's or AWS's package).

`MpDeviceLoader(loader, device)` and `ParallelLoader(loader, devices).per_device_loader(device)` wrap a data
loader: each batch's tensors are moved to the device (the CPU here, so they stay where they are) and, as with
torch_xla's loaders, the training loop needs no `xm.mark_step()` of its own: a step boundary is passed when
the next batch is asked for after every `batches_per_execution` batches, and after the last batch. There is
no background prefetching: batches are read when they are asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from neuron_emu.shims import missing_attribute

from ..core import xla_model as xm

__all__ = ["MpDeviceLoader", "ParallelLoader", "PerDeviceLoader"]


def _to_device(data: Any, device: torch.device) -> Any:
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if isinstance(data, dict):
        return type(data)((key, _to_device(value, device)) for key, value in data.items())
    if isinstance(data, list):
        return [_to_device(value, device) for value in data]
    if isinstance(data, tuple):
        moved = [_to_device(value, device) for value in data]
        return type(data)(*moved) if hasattr(data, "_fields") else tuple(moved)
    return data


class PerDeviceLoader:
    """Iterates the wrapped loader once, yielding batches on `device` and marking steps between them."""

    def __init__(self, loader: Iterable[Any], device: Any, batches_per_execution: int = 1) -> None:
        if batches_per_execution < 1:
            raise ValueError(f"batches_per_execution must be at least 1, got {batches_per_execution}")
        self._iterator = iter(loader)
        self._device = xm.xla_device()
        self._batches_per_execution = batches_per_execution
        self._since_step = 0  # batches handed out since the last step boundary

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._since_step >= self._batches_per_execution:
            self._since_step = 0
            xm.mark_step()
        try:
            batch = next(self._iterator)
        except StopIteration:
            if self._since_step:
                self._since_step = 0
                xm.mark_step()
            raise
        self._since_step += 1
        return _to_device(batch, self._device)

    next = __next__


class ParallelLoader:
    """torch_xla's ParallelLoader over the one emulated device."""

    def __init__(self, cpu_loader: Iterable[Any], devices: Sequence[Any], batches_per_execution: int = 1, **_: Any):
        self._loader = cpu_loader
        self._devices = list(devices)
        self._batches_per_execution = batches_per_execution

    def per_device_loader(self, device: Any) -> PerDeviceLoader:
        return PerDeviceLoader(self._loader, device, self._batches_per_execution)


class MpDeviceLoader:
    """Wraps a loader so each epoch's iteration yields batches on `device` (torch_xla's MpDeviceLoader)."""

    def __init__(self, loader: Iterable[Any], device: Any, **kwargs: Any) -> None:
        self._loader = loader
        self._device = device
        self._kwargs = kwargs

    def __iter__(self) -> Iterator[Any]:
        return ParallelLoader(self._loader, [self._device], **self._kwargs).per_device_loader(self._device)

    def __len__(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, __all__)
