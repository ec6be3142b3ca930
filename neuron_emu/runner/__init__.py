"""Run scripts written for torch-neuronx unchanged on a CPU: `python -m neuron_emu run SCRIPT.py [ARGS]`.

Inside the run `torch_neuronx`, `torch_neuronx.xla_impl.custom_op`, `torch_xla` and
`torch_xla.core.xla_model` are neuron_emu's stand-ins (not AWS's or Google's packages), the `xla` device is
the CPU, `xm.mark_step()` is a step boundary and `xm.save` writes CPU tensors. Nothing is installed under
those names: outside the run they do not exist (or are the real packages, if installed).
"""

from neuron_emu.runner.device import XlaOnCpu, is_xla_device
from neuron_emu.runner.finder import ShimFinder, shim_imports
from neuron_emu.runner.script import RunnerError, resolve_script, run_script, script_environment, script_traceback

__all__ = [
    "RunnerError",
    "ShimFinder",
    "XlaOnCpu",
    "is_xla_device",
    "resolve_script",
    "run_script",
    "script_environment",
    "script_traceback",
    "shim_imports",
]
