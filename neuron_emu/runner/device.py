"""The emulated `xla` device: inside a run, every 'xla' / 'xla:N' device argument means the CPU.

torch knows the XLA device type, so `torch.device('xla')` constructs, but without torch_xla's kernels a
tensor cannot live there (`torch.zeros(2, device='xla')` fails). `XlaOnCpu` is a TorchFunctionMode
(https://docs.pytorch.org/docs/stable/notes/extending.html#extending-all-torch-api-with-modes) that sees
every overridable torch call, including factories, `torch.device(...)`, `Tensor.to` and the argument
parser of `Module.to`, and rewrites the device arguments that name XLA to the CPU, so `model.to('xla')`,
`x.to(device)`, `torch.zeros(..., device=device)` and `torch.device('xla')` all give CPU tensors/devices.
Computation is untouched: results are bit-identical to the same script run on the CPU.

Torch function modes are per thread: threads a script starts do not see the mapping (devices obtained
from `xm.xla_device()` are already CPU devices and work there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

CPU = torch.device("cpu")
_XLA_NAME = re.compile(r"xla(:\d+)?")

# Calls whose positional arguments may name a device: the device constructor, Tensor.to(device, ...) and
# the parser Module.to(device, ...) hands its arguments to (seen as a torch function in torch 2.13).
_POSITIONAL_DEVICE_CALLS: frozenset[Callable[..., Any]] = frozenset(
    {torch.device, torch.Tensor.to, torch._C._nn._parse_to}
)


def is_xla_device(value: object) -> bool:
    """True for `torch.device('xla'[, n])` and the strings 'xla' / 'xla:N'."""
    if isinstance(value, torch.device):
        return value.type == "xla"
    if isinstance(value, str):
        return _XLA_NAME.fullmatch(value.strip()) is not None
    return False


def cpu_for_xla(value: Any) -> Any:
    """The CPU in place of an XLA device (a string stays a string); anything else unchanged."""
    if not is_xla_device(value):
        return value
    return "cpu" if isinstance(value, str) else CPU


def _device_constructor(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """True when `torch.device(*args, **kwargs)` names XLA: `('xla')`, `('xla:1')`, `('xla', 0)`, `(type='xla')`."""
    first = args[0] if args else kwargs.get("type")
    return is_xla_device(first)


class XlaOnCpu(TorchFunctionMode):
    """Maps XLA device arguments to the CPU for every torch call made while the mode is active."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        # Called for every torch call of the script: the common case (no device argument) stays cheap.
        if func is torch.device and _device_constructor(args, kwargs or {}):
            return CPU
        if kwargs and "device" in kwargs:
            kwargs = {**kwargs, "device": cpu_for_xla(kwargs["device"])}
        if func in _POSITIONAL_DEVICE_CALLS:
            args = tuple(cpu_for_xla(arg) for arg in args)
        elif any(type(arg) is torch.device for arg in args):
            args = tuple(cpu_for_xla(arg) if type(arg) is torch.device else arg for arg in args)
        return func(*args, **(kwargs or {}))
