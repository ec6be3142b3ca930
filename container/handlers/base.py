"""The one interface every model runtime implements: `load()` then `predict()`; precision is its own business."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from container.errors import ContainerError
from container.manifest import Manifest

# Positional input order of every graph Sagebox exports (a graph may ignore token_type_ids).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# A batch of same-length features: input_ids, attention_mask, token_type_ids, each int64 [batch, seq].
ModelInputs = dict[str, np.ndarray]


class HandlerError(ContainerError, RuntimeError):
    """A model the handler cannot load or run."""


@dataclass(frozen=True)
class RuntimeOptions:
    """How a handler may use the CPUs: intra-op threads; whether pool threads spin-wait for the next op within a
    call (lower latency for the many short ops of a small model; they sleep once the call returns); whether
    denormal floats are flushed to zero (masked attention scores underflow into them, and CPUs handle them
    slowly: ~1 ms of a 6 ms INT8 MiniLM call on this machine). Runtimes without such controls ignore them."""

    threads: int = 1
    spin_wait: bool = True
    flush_denormals: bool = True
    # Memory a runtime may spend on graphs compiled per sequence bucket (OpenVINO's static shapes); None: its default.
    static_shapes_mb: int | None = None
    # Compile such graphs after the model is ready, serving on its general graph meanwhile (a server); False: at load.
    background_compile: bool = False


class Handler(Protocol):
    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        """Load the model named by the (already verified) manifest, using the CPUs as `runtime` allows."""
        ...

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, ...]:
        """Return the graph's outputs in order as float32 arrays, batch first (the task checks their shapes: start
        and end logits [batch, seq] for question answering, logits [batch, labels] for classification, ...)."""
        ...


@runtime_checkable
class Closable(Protocol):
    """A handler that holds resources beyond this process's memory (the neuron handler's tensor-parallel worker
    processes) has `close()`; the others need none."""

    def close(self) -> None:
        """Release them; the handler cannot predict afterwards. Safe to call twice."""
        ...


def close_handler(handler: object) -> None:
    """Call the handler's `close()` if it has one (what a server does once it stops serving)."""
    if isinstance(handler, Closable):
        handler.close()


@runtime_checkable
class HelperProcesses(Protocol):
    """A handler that runs model code in processes of its own (the neuron handler's tensor-parallel workers) has
    `serve_as(uid, gid)`: those processes take that identity, as the server does once the model is loaded."""

    def serve_as(self, uid: int, gid: int) -> None:
        """Every helper process becomes uid/gid (or raises HandlerError)."""
        ...


@runtime_checkable
class WarmUpPlan(Protocol):
    """A handler whose one graph takes every sequence length (ONNX Runtime) has `warm_up_buckets(buckets)`: the
    buckets whose first calls leave every bucket's first call at full speed. Handlers without it are warmed up on
    every bucket (a TorchScript graph specializes per shape on its first calls; a Neuron model is one graph per
    bucket)."""

    def warm_up_buckets(self, buckets: Sequence[int]) -> list[int]:
        """The buckets to call once at load, in order (a non-empty subset of `buckets`)."""
        ...


def warm_up_buckets(handler: object, buckets: Sequence[int]) -> list[int]:
    """The buckets a load calls once before the model is ready: the handler's plan, else every bucket."""
    if isinstance(handler, WarmUpPlan):
        return handler.warm_up_buckets(buckets)
    return list(buckets)


def serve_handler_as(handler: object, uid: int, gid: int) -> None:
    """Move the handler's helper processes, if it has any, to uid/gid."""
    if isinstance(handler, HelperProcesses):
        handler.serve_as(uid, gid)
