"""neuron_emu: run the Inferentia2/Trainium (NeuronCore-v2) workflow on a CPU.

`custom_op.load` builds Neuron custom C++ operators, `trace` compiles a model the way
`torch_neuronx.trace` does (fixed shapes, auto-cast numerics), and every traced graph carries a per-op
cost plan for Neuron instances.
Submodules are imported lazily so `import neuron_emu` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "trace": "neuron_emu.tracing",
    "trace_buckets": "neuron_emu.tracing",
    "analyze": "neuron_emu.tracing",
    "dynamic_batch": "neuron_emu.runtime",
    "load": "neuron_emu.runtime",
    "describe": "neuron_emu.runtime",
    "cost_plan": "neuron_emu.runtime",
    "compile_qa": "neuron_emu.qa",
    "compile_model": "neuron_emu.qa",
    "CompiledArtifact": "neuron_emu.qa",
    "CompileInfo": "neuron_emu.qa",
    "DEFAULT_QA_COMPILER_ARGS": "neuron_emu.qa",
    "custom_op": "neuron_emu.custom_op",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'neuron_emu' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    return module if name == "custom_op" else getattr(module, name)


__all__ = sorted(_EXPORTS)
