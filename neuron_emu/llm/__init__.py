"""Decoder LLMs (Llama/Mistral/Qwen2, GPT-2, OPT) for NeuronCores: their shape read from a Hugging Face config
(`config`), compiled the way NxD Inference does it and run on emulated NeuronCores, sized and priced per token.

`compile_decoder(config, weights, tp_degree=..., batch_size=..., max_length=..., buckets=...)` traces per bucket a
context-encoding and a token-generation step (neuron_emu.trace: fixed shapes, bf16 auto-cast by default), shards
the weights over tp_degree ranks (column-/row-parallel, all-reduce after each row-parallel layer, grouped-query
key/value heads split or replicated) and returns a `CompiledDecoder`; `.save(dir)` writes it, `load(dir)` serves it
as a `NeuronDecoder` (`context_encode`, `token_generate`, `generate`, `close`) whose KV cache stays on its
emulated NeuronCores. Two executors run the ranks: "in_process" (the default; an all-reduce is a sum in rank order)
and, with `load(dir, executor="processes")` or `compile_decoder(..., executor="processes")`, one worker process per
rank holding its weights and KV cache, the all-reduces gloo collectives over loopback among them (neuron_emu.parallel's
worker processes); the API is the same. Submodules are imported lazily.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "compile_decoder": "neuron_emu.llm.compile",
    "CompiledDecoder": "neuron_emu.llm.compile",
    "load": "neuron_emu.llm.artifact",
    "NeuronDecoder": "neuron_emu.llm.runtime",
    "DecoderConfig": "neuron_emu.llm.config",
    "read_config": "neuron_emu.llm.config",
    "UnsupportedModel": "neuron_emu.llm.config",
    "DecoderCompileError": "neuron_emu.llm.errors",
    "DecoderInputError": "neuron_emu.llm.errors",
    "ContextLengthError": "neuron_emu.llm.errors",
    "default_buckets": "neuron_emu.llm.buckets",
}


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'neuron_emu.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(module_name), name)


__all__ = sorted(_EXPORTS)
