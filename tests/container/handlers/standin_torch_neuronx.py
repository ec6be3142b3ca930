"""A STAND-IN for AWS's `torch_neuronx` package, which cannot be installed here (it needs the Neuron SDK).

It is not torch-neuronx and proves nothing about Neuron hardware. It has the two functions Sagebox calls, with
the signatures AWS documents ("PyTorch NeuronX Tracing API for Inference",
awsdocs-neuron.readthedocs-hosted.com/.../api-torch-neuronx-trace.html):

- `trace(func, example_inputs, *, compiler_workdir=None, compiler_args=None, inline_weights_to_neff=True)`
  records its arguments and returns `torch.jit.trace(func, example_inputs)`: a plain CPU TorchScript module
  where the real one returns a module wrapping a NEFF that only runs on NeuronCores;
- `dynamic_batch(module)` records the call and returns the module (a CPU TorchScript trace of the QA models
  takes any batch size already; the real one splits and pads dim 0 into traced-size chunks).

The `standin_torch_neuronx` fixture puts it into `sys.modules` as `torch_neuronx` for one test and removes it
afterwards, so code under test that does `import torch_neuronx` gets it, and no other test ever sees it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

MODULE_NAME = "torch_neuronx"


@dataclass(frozen=True)
class TraceCall:
    """One `trace()` call: the example input shapes and dtypes, and the compiler arguments as given."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[torch.dtype, ...]
    compiler_args: str | list[str] | None
    compiler_workdir: str | None


class StandinTorchNeuronx(types.ModuleType):
    """The stand-in module object (see the module docstring); `IS_STANDIN` says so to anyone who asks."""

    IS_STANDIN = True
    __version__ = "0.0.0+standin"

    def __init__(self) -> None:
        super().__init__(MODULE_NAME, "STAND-IN for torch_neuronx (tests only; not AWS's package)")
        self.trace_calls: list[TraceCall] = []
        self.dynamic_batch_calls: list[Any] = []
        self.fail_trace: str | None = None  # set to make trace() raise like a compiler error

    def trace(
        self,
        func: Any,
        example_inputs: Sequence[torch.Tensor],
        *,
        compiler_workdir: str | None = None,
        compiler_args: str | list[str] | None = None,
        inline_weights_to_neff: bool = True,
    ) -> torch.jit.ScriptModule:
        inputs = tuple(example_inputs)
        self.trace_calls.append(
            TraceCall(
                shapes=tuple(tuple(t.shape) for t in inputs),
                dtypes=tuple(t.dtype for t in inputs),
                compiler_args=list(compiler_args) if isinstance(compiler_args, list) else compiler_args,
                compiler_workdir=compiler_workdir,
            )
        )
        if self.fail_trace:
            raise RuntimeError(f"neuronx-cc failed (stand-in)\n{self.fail_trace}")
        traced: torch.jit.ScriptModule = torch.jit.trace(func, inputs, check_trace=False)
        return traced

    def dynamic_batch(self, module: Any) -> Any:
        self.dynamic_batch_calls.append(module)
        return module


@pytest.fixture
def standin_torch_neuronx() -> Iterator[StandinTorchNeuronx]:
    """The stand-in installed as `torch_neuronx` for one test, then removed (whatever was there is restored)."""
    previous = sys.modules.get(MODULE_NAME)
    standin = StandinTorchNeuronx()
    sys.modules[MODULE_NAME] = standin
    try:
        yield standin
    finally:
        if previous is None:
            sys.modules.pop(MODULE_NAME, None)
        else:
            sys.modules[MODULE_NAME] = previous


@pytest.fixture
def without_torch_neuronx() -> Iterator[None]:
    """`import torch_neuronx` fails for one test (as on any host without the Neuron SDK), whatever is installed."""
    previous = sys.modules.get(MODULE_NAME)
    sys.modules[MODULE_NAME] = None  # type: ignore[assignment]  # Python's documented way to block an import
    try:
        yield
    finally:
        if previous is None:
            sys.modules.pop(MODULE_NAME, None)
        else:
            sys.modules[MODULE_NAME] = previous
