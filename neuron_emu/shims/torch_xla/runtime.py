"""Stand-in for `torch_xla.runtime`, provided by neuron_emu (not Google's or AWS's package).

One process with one device: world size 1, ordinals 0, device type NEURON (what `PJRT_DEVICE` is on
Trainium/Inferentia instances).
"""

from __future__ import annotations

from typing import Any

from neuron_emu.shims import missing_attribute, not_provided

__all__ = [
    "addressable_device_count",
    "device_type",
    "global_device_count",
    "global_ordinal",
    "global_runtime_device_count",
    "local_device_count",
    "local_ordinal",
    "local_process_count",
    "use_spmd",
    "world_size",
]

DEVICE_TYPE = "NEURON"


def device_type() -> str:
    return DEVICE_TYPE


def world_size() -> int:
    return 1


def global_ordinal() -> int:
    return 0


def local_ordinal() -> int:
    return 0


def local_process_count() -> int:
    return 1


def local_device_count() -> int:
    return 1


def addressable_device_count() -> int:
    return 1


def global_device_count() -> int:
    return 1


def global_runtime_device_count() -> int:
    return 1


use_spmd = not_provided("torch_xla.runtime.use_spmd", reason="SPMD sharding is not emulated")


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, __all__)
