"""Stand-in for `torch_neuronx.xla_impl`, provided by neuron_emu (not AWS's package): holds `custom_op`."""

from __future__ import annotations

from typing import Any

from neuron_emu.shims import missing_attribute


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, ["custom_op"])
