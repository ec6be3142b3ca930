"""Stand-in for `torch_xla.core.xla_model`, provided by neuron_emu (not Google's or AWS's package).

Emulates one process driving one device (world size 1, ordinal 0) whose memory is the host's: the XLA
device is the CPU, tensors on it are CPU tensors and every op runs eagerly. So:

- `xla_device()` returns `torch.device('cpu')`; `mark_step()` is the step boundary (there is no pending
  graph to run; closures registered with `add_step_closure` run there, in order); `wait_device_ops` and
  `unlazy` have nothing to wait for.
- `save` writes CPU tensors with `torch.save` (master ordinal only, which this process always is).
- Collectives reduce over one replica: `all_reduce` only applies `scale`, `all_gather` returns the value,
  `reduce_gradients` leaves gradients alone, `rendezvous` returns this replica's payload.

Signatures follow the torch_xla API reference (https://docs.pytorch.org/xla/release/r2.6/learn/api-guide.html).
Functions listed in `NOT_PROVIDED` fail with one line when called; other unknown names fail on access.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

import torch

from neuron_emu.shims import missing_attribute, not_provided

REDUCE_SUM = "sum"
REDUCE_MUL = "mul"
REDUCE_AND = "and"
REDUCE_OR = "or"
REDUCE_MIN = "min"
REDUCE_MAX = "max"
_REDUCE_TYPES = (REDUCE_SUM, REDUCE_MUL, REDUCE_AND, REDUCE_OR, REDUCE_MIN, REDUCE_MAX)

DEVICE_HW = "NEURON"
_DEVICE_NAME = "xla:0"

# Closures registered for the current step: (closure, args), run by mark_step in registration order.
_STEP_CLOSURES: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []


def xla_device(n: int | None = None, devkind: str | None = None) -> torch.device:
    """The emulated XLA device, which is the CPU (there is one device: n must be None or 0)."""
    if n not in (None, 0):
        raise ValueError(f"xla_device({n}): neuron_emu emulates one device per process (xla:0)")
    return torch.device("cpu")


def xla_device_hw(device: Any) -> str:
    """The hardware type behind a device: NEURON, as on Trainium/Inferentia."""
    return DEVICE_HW


def get_xla_supported_devices(devkind: str | None = None, max_devices: int | None = None) -> list[str]:
    return [_DEVICE_NAME]


def is_xla_tensor(tensor: torch.Tensor) -> bool:
    """True for tensors on the emulated device: every CPU tensor (and any tensor torch reports as XLA)."""
    return tensor.device.type in ("cpu", "xla")


def get_ordinal(defval: int = 0) -> int:
    return 0


def get_local_ordinal(defval: int = 0) -> int:
    return 0


def is_master_ordinal(local: bool = True) -> bool:
    return True


def xrt_world_size(defval: int = 1) -> int:
    return 1


def mark_step(wait: bool = False, reset_scope: bool = True) -> None:
    """A step boundary: runs the closures `add_step_closure` registered for this step, in order."""
    closures = list(_STEP_CLOSURES)
    _STEP_CLOSURES.clear()
    for closure, args in closures:
        closure(*args)


def add_step_closure(closure: Callable[..., Any], args: Sequence[Any] = (), run_async: bool = False) -> None:
    """Run `closure(*args)` at the end of the current step (the next `mark_step`)."""
    _STEP_CLOSURES.append((closure, tuple(args)))


def wait_device_ops(devices: Sequence[Any] = ()) -> None:
    """Nothing to wait for: the emulated device runs every op eagerly."""


def unlazy(tensors: Iterable[torch.Tensor]) -> None:
    """Nothing to materialize: tensors on the emulated device are CPU tensors."""


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    barrier: bool = False,
    optimizer_args: dict[str, Any] | None = None,
    groups: Any = None,
    pin_layout: bool = True,
) -> Any:
    """Reduce gradients over the replicas (one here), run `optimizer.step`, and mark the step if `barrier`."""
    reduce_gradients(optimizer, groups=groups, pin_layout=pin_layout)
    result = optimizer.step(**(optimizer_args or {}))
    if barrier:
        mark_step()
    return result


def reduce_gradients(optimizer: torch.optim.Optimizer, groups: Any = None, pin_layout: bool = True) -> None:
    """With one replica the averaged gradients are the gradients: nothing to do."""


def _check_reduce_type(reduce_type: str) -> None:
    if reduce_type not in _REDUCE_TYPES:
        raise ValueError(f"all_reduce: reduce_type {reduce_type!r} is not one of {', '.join(_REDUCE_TYPES)}")


def all_reduce(
    reduce_type: str,
    inputs: torch.Tensor | list[torch.Tensor],
    scale: float = 1.0,
    groups: Any = None,
    pin_layout: bool = True,
) -> torch.Tensor | list[torch.Tensor]:
    """Reduce over one replica: a tensor gives a new tensor `inputs * scale`; a list is scaled in place."""
    _check_reduce_type(reduce_type)
    if isinstance(inputs, torch.Tensor):
        return inputs * scale if scale != 1.0 else inputs.clone()
    if scale != 1.0:
        with torch.no_grad():
            for tensor in inputs:
                tensor.mul_(scale)
    return inputs


def all_gather(
    value: torch.Tensor,
    dim: int = 0,
    groups: Any = None,
    output: torch.Tensor | None = None,
    pin_layout: bool = True,
) -> torch.Tensor:
    """Concatenate `value` from every replica along `dim`: with one replica, `value` itself (a copy)."""
    if output is not None:
        output.copy_(value)
        return output
    return value.clone()


def rendezvous(tag: str, payload: bytes = b"", replicas: Sequence[int] = ()) -> list[bytes]:
    """Every replica's payload, in ordinal order: this process's only."""
    return [payload]


def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[list[Any]], Any]) -> Any:
    return reduce_fn([data])


def do_on_ordinals(target: Callable[..., Any], data: Sequence[Any] = (), ordinals: Sequence[int] = (0,)) -> Any:
    return target(*data) if 0 in ordinals else None


def master_print(*args: Any, fd: TextIO | None = None, finalizer: Callable[[], Any] | None = None) -> None:
    """print on the master ordinal (this process); `fd` defaults to the current sys.stdout."""
    print(*args, file=fd if fd is not None else sys.stdout)
    if finalizer is not None:
        finalizer()


def _to_cpu(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data.cpu()
    if isinstance(data, dict):
        return type(data)((key, _to_cpu(value)) for key, value in data.items())
    if isinstance(data, list):
        return [_to_cpu(value) for value in data]
    if isinstance(data, tuple):
        converted = [_to_cpu(value) for value in data]
        return type(data)(*converted) if hasattr(data, "_fields") else tuple(converted)
    return data


def save(data: Any, file_or_path: Any, master_only: bool = True, global_master: bool = False) -> None:
    """torch.save of `data` with its tensors on the CPU (only the master ordinal writes: this process does)."""
    should_write = not master_only or is_master_ordinal(local=not global_master)
    if should_write:
        torch.save(_to_cpu(data), file_or_path)


def set_rng_state(seed: int, device: Any = None) -> None:
    """Seed the emulated device's generator, which is torch's CPU generator."""
    torch.manual_seed(seed)


NOT_PROVIDED = {
    name: not_provided(f"torch_xla.core.xla_model.{name}", reason=reason)
    for name, reason in {
        "all_to_all": "collectives beyond one replica are not emulated",
        "reduce_scatter": "collectives beyond one replica are not emulated",
        "collective_permute": "collectives beyond one replica are not emulated",
        "send": "collectives beyond one replica are not emulated",
        "recv": "collectives beyond one replica are not emulated",
        "get_rng_state": "the device generator is torch's CPU generator: use torch.get_rng_state()",
        "get_memory_info": "there is no device memory to report",
        "get_stablehlo": "there is no XLA graph",
        "get_stablehlo_bytecode": "there is no XLA graph",
    }.items()
}
globals().update(NOT_PROVIDED)

EMULATED = (
    "add_step_closure",
    "all_gather",
    "all_reduce",
    "do_on_ordinals",
    "get_local_ordinal",
    "get_ordinal",
    "get_xla_supported_devices",
    "is_master_ordinal",
    "is_xla_tensor",
    "mark_step",
    "master_print",
    "mesh_reduce",
    "optimizer_step",
    "reduce_gradients",
    "rendezvous",
    "save",
    "set_rng_state",
    "unlazy",
    "wait_device_ops",
    "xla_device",
    "xla_device_hw",
    "xrt_world_size",
)


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, EMULATED)
