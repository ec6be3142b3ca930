"""Tensor-parallel inference over emulated NeuronCores (the NeuronLink path of Inferentia2 / Trainium).

`trace(model, example_inputs, tp_degree=N, compiler_args=...)` shards any model holding one BERT-family encoder
(BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA or DistilBERT, found in its module tree wherever a wrapper keeps
it) over N ranks: the encoder's attention heads and feed-forward units split column-/row-parallel, an all-reduce
after each row-parallel projection, the embeddings and the head (whatever the model does after the encoder:
pooler, classifier, QA span head, a wrapper's pooling) replicated. It traces every rank's graphs with
neuron_emu.trace and returns a `ParallelModel` that runs them on N worker processes exchanging partial sums through
gloo all-reduces, called like neuron_emu.trace's module of the same model and returning what it returns.
`load(path)` serves a saved one (also the QA-only format-1 directories of earlier versions).
Stand-in: processes and gloo over loopback emulate NeuronCores and NeuronLink; only the cost plan speaks for the
hardware (an estimate). Submodules are imported lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "trace": "neuron_emu.parallel.compile",
    "load": "neuron_emu.parallel.module",
    "ParallelModel": "neuron_emu.parallel.module",
    "ParallelPlan": "neuron_emu.parallel.cost",
    "ShardProfile": "neuron_emu.parallel.cost",
    "parallel_plan": "neuron_emu.parallel.cost",
    "interconnect": "neuron_emu.parallel.cost",
    "allreduce_us": "neuron_emu.parallel.cost",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'neuron_emu.parallel' has no attribute {name!r}")
    return getattr(importlib.import_module(module_name), name)


__all__ = sorted(_EXPORTS)
