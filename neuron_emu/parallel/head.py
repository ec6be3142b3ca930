"""The head: the rest of the model after its encoder's last layer, run by the last segment of every rank.

The head is not rebuilt from known task heads: the last segment calls the model's own forward on the original
inputs, on a copy of the model in which the encoder's embeddings return the final hidden state (computed by the
sharded layers and handed over through a slot) and its layer stack is empty, so it passes that state through.
Poolers, classifiers, dropout in eval mode, a wrapper's pooling and normalisation: whatever the model does after
the encoder runs unchanged and is traced into the last segment's graph.

The copy is shallow: only the modules on the path from the model to its encoder are copied (sharing everything
else), so the head's parameters are exactly the model's parameters outside the encoder's embeddings and layers,
and the model passed to trace is never modified.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from neuron_emu.errors import TraceError
from neuron_emu.parallel.encoder import EncoderParts

Tensor = torch.Tensor


def flatten_outputs(out: Any) -> tuple[str, tuple[Tensor, ...]]:
    """(kind, tensors) of what a model returned: "tensor" for a Tensor; "tuple" for a tuple/list of Tensors or a
    Hugging Face ModelOutput (its non-None values in order, as the model returns with return_dict=False)."""
    if isinstance(out, Tensor):
        return "tensor", (out,)
    to_tuple = getattr(out, "to_tuple", None)
    if isinstance(out, Mapping) and callable(to_tuple):
        values = tuple(to_tuple())
    elif isinstance(out, tuple | list):
        values = tuple(out)
    else:
        raise TraceError(
            f"the model returned {type(out).__name__}; neuron_emu.parallel needs a Tensor, a tuple of Tensors or a "
            "Hugging Face ModelOutput"
        )
    if not values or not all(isinstance(v, Tensor) for v in values):
        kinds = ", ".join(type(v).__name__ for v in values) or "nothing"
        raise TraceError(
            f"the model returned a {type(out).__name__} of {kinds}; neuron_emu.parallel needs outputs that are Tensors"
        )
    return "tuple", values


class Slot:
    """Hands the final hidden state to the stubbed embeddings, and counts how often the model's forward asked."""

    def __init__(self) -> None:
        self.hidden: Tensor | None = None
        self.calls = 0


class FinalHidden(nn.Module):
    """Stands in for the encoder's embeddings inside the head: returns the final hidden state."""

    def __init__(self, slot: Slot) -> None:
        super().__init__()
        self.slot = slot

    def forward(self, *_: Any, **__: Any) -> Tensor:
        self.slot.calls += 1
        if self.slot.hidden is None:
            raise TraceError("the head's stubbed embeddings ran outside the last segment")
        return self.slot.hidden


class PassThrough(nn.Module):
    """Stands in for ELECTRA's embeddings projection: the stubbed embeddings already return the hidden size."""

    def forward(self, hidden: Tensor, *_: Any, **__: Any) -> Tensor:
        return hidden


def _shallow(module: nn.Module) -> nn.Module:
    """A new module object sharing `module`'s attributes but with its own table of submodules."""
    clone = copy.copy(module)
    object.__setattr__(clone, "_modules", dict(module._modules))
    return clone


def _child(parent: nn.Module, name: str) -> nn.Module:
    child = parent._modules.get(name)
    if child is None:
        raise TraceError(f"{type(parent).__name__} has no submodule {name!r}")
    return child


def stubbed_copy(parts: EncoderParts, slot: Slot) -> nn.Module:
    """`parts.model` with the encoder's embeddings returning `slot.hidden` and its layer stack emptied."""
    root = _shallow(parts.model)
    encoder = root
    for name in parts.path.split(".") if parts.path else []:
        child = _shallow(_child(encoder, name))
        encoder._modules[name] = child
        encoder = child
    encoder._modules["embeddings"] = FinalHidden(slot)
    if parts.embeddings_project is not None:
        encoder._modules["embeddings_project"] = PassThrough()
    stack = _shallow(_child(encoder, parts.stack_name))
    stack._modules["layer"] = nn.ModuleList()
    encoder._modules[parts.stack_name] = stack
    return root


class HeadModel(nn.Module):
    """The model's own forward on (final hidden state, *original inputs) -> its outputs as a tuple of Tensors."""

    def __init__(self, parts: EncoderParts) -> None:
        super().__init__()
        self.slot = Slot()
        self.model = stubbed_copy(parts, self.slot)  # in eval mode like the model (checked)

    def forward(self, hidden: Tensor, *inputs: Tensor) -> tuple[Tensor, ...]:
        self.slot.hidden = hidden
        try:
            out = self.model(*inputs)
        finally:
            self.slot.hidden = None
        return flatten_outputs(out)[1]
