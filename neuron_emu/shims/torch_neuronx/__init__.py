"""Stand-in for `torch_neuronx`, provided by neuron_emu (not AWS's package).

Resolved under the name `torch_neuronx` only inside `python -m neuron_emu run SCRIPT.py`. `trace`,
`analyze` and `dynamic_batch` forward to neuron_emu's emulation (CPU numerics with the compiler's auto-cast,
a TorchScript module taking and returning CPU tensors); `torch_neuronx.xla_impl.custom_op` builds and loads
Neuron custom C++ operators with neuron_emu.custom_op.
"""

from __future__ import annotations

from typing import Any

from neuron_emu.shims import missing_attribute

__all__ = ["analyze", "dynamic_batch", "trace"]


def trace(func: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
    """torch_neuronx.trace, emulated by neuron_emu.trace (same arguments)."""
    from neuron_emu.tracing import trace as emulated_trace

    return emulated_trace(func, example_inputs, *args, **kwargs)


def analyze(func: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
    """torch_neuronx.analyze, emulated by neuron_emu.analyze (same arguments and report format)."""
    from neuron_emu.tracing import analyze as emulated_analyze

    return emulated_analyze(func, example_inputs, *args, **kwargs)


def dynamic_batch(neuron_script: Any) -> Any:
    """torch_neuronx.dynamic_batch, emulated by neuron_emu.dynamic_batch."""
    from neuron_emu.runtime import dynamic_batch as emulated_dynamic_batch

    return emulated_dynamic_batch(neuron_script)


def __getattr__(name: str) -> Any:
    raise missing_attribute(__name__, name, [*__all__, "xla_impl"])
