"""The parts of a BERT-family question-answering model that tensor parallelism splits or replicates.

Supported: the Hugging Face `*ForQuestionAnswering` models whose layers follow BERT's module layout
(`attention.self.{query,key,value}`, `attention.output.{dense,LayerNorm}`, `intermediate.dense`,
`output.{dense,LayerNorm}`): BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA. The model may be passed bare or
inside a wrapper module that keeps it as `.model` (Sagebox's QA wrapper), whose `uses_token_types` is honoured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from neuron_emu.errors import TraceError


@dataclass(frozen=True)
class LayerParts:
    query: nn.Linear
    key: nn.Linear
    value: nn.Linear
    attention_out: nn.Linear
    attention_norm: nn.LayerNorm
    ffn_in: nn.Linear
    activation: Callable[[torch.Tensor], torch.Tensor]
    ffn_out: nn.Linear
    ffn_norm: nn.LayerNorm
    scaling: float


@dataclass(frozen=True)
class EncoderParts:
    model_type: str
    embeddings: nn.Module
    embeddings_project: nn.Module | None
    layers: tuple[LayerParts, ...]
    qa_outputs: nn.Linear
    heads: int
    head_dim: int
    hidden: int
    intermediate: int
    uses_token_types: bool

    def describe(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "layers": len(self.layers),
            "hidden": self.hidden,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "intermediate": self.intermediate,
            "uses_token_types": self.uses_token_types,
        }


def _unwrap(model: nn.Module) -> tuple[nn.Module, bool]:
    """The Hugging Face QA model and whether token_type_ids reach it."""
    if hasattr(model, "qa_outputs"):
        return model, True
    inner = getattr(model, "model", None)
    if isinstance(inner, nn.Module) and hasattr(inner, "qa_outputs"):
        return inner, bool(getattr(model, "uses_token_types", True))
    raise TraceError(
        f"neuron_emu.parallel shards Hugging Face *ForQuestionAnswering models (or a wrapper keeping one as "
        f".model); {type(model).__name__} has no qa_outputs head"
    )


def _linear(module: Any, name: str, where: str) -> nn.Linear:
    found = getattr(module, name, None)
    if not isinstance(found, nn.Linear):
        raise TraceError(f"{where}.{name} is not a torch.nn.Linear; neuron_emu.parallel needs BERT's layer layout")
    return found


def _norm(module: Any, where: str) -> nn.LayerNorm:
    found = getattr(module, "LayerNorm", None)
    if not isinstance(found, nn.LayerNorm):
        raise TraceError(f"{where}.LayerNorm is not a torch.nn.LayerNorm; neuron_emu.parallel needs BERT's layout")
    return found


def _layer(layer: nn.Module, index: int, head_dim: int) -> LayerParts:
    where = f"encoder.layer[{index}]"
    attention = getattr(layer, "attention", None)
    attn_self = getattr(attention, "self", None)
    attn_out = getattr(attention, "output", None)
    intermediate = getattr(layer, "intermediate", None)
    output = getattr(layer, "output", None)
    if attn_self is None or attn_out is None or intermediate is None or output is None:
        raise TraceError(
            f"{where} is not a BERT-style layer (attention.self, attention.output, intermediate, output); "
            "neuron_emu.parallel supports BERT, RoBERTa, XLM-RoBERTa, CamemBERT and ELECTRA encoders"
        )
    if getattr(layer, "add_cross_attention", False) or getattr(attn_self, "is_decoder", False):
        raise TraceError(f"{where} is a decoder layer; neuron_emu.parallel shards encoders only")
    activation = getattr(intermediate, "intermediate_act_fn", None)
    if not callable(activation):
        raise TraceError(f"{where}.intermediate has no intermediate_act_fn")
    return LayerParts(
        query=_linear(attn_self, "query", f"{where}.attention.self"),
        key=_linear(attn_self, "key", f"{where}.attention.self"),
        value=_linear(attn_self, "value", f"{where}.attention.self"),
        attention_out=_linear(attn_out, "dense", f"{where}.attention.output"),
        attention_norm=_norm(attn_out, f"{where}.attention.output"),
        ffn_in=_linear(intermediate, "dense", f"{where}.intermediate"),
        activation=activation,
        ffn_out=_linear(output, "dense", f"{where}.output"),
        ffn_norm=_norm(output, f"{where}.output"),
        scaling=float(getattr(attn_self, "scaling", head_dim**-0.5)),
    )


def encoder_parts(model: nn.Module) -> EncoderParts:
    """Find the embeddings, layers and QA head of `model`, refusing layouts the sharding does not know."""
    if not isinstance(model, nn.Module):
        raise TraceError(f"neuron_emu.parallel.trace needs a torch.nn.Module, got {type(model).__name__}")
    if model.training:
        raise TraceError("call model.eval() before tracing: a NeuronCore graph is inference-only")
    hf, uses_token_types = _unwrap(model)
    config = getattr(hf, "config", None)
    base = getattr(hf, "base_model", None)
    if config is None or base is None:
        raise TraceError(f"{type(hf).__name__} is not a Hugging Face PreTrainedModel (no config/base_model)")
    position_type = getattr(config, "position_embedding_type", "absolute") or "absolute"
    if position_type != "absolute":
        raise TraceError(f"position_embedding_type {position_type!r} is not supported (only 'absolute')")
    if getattr(config, "is_decoder", False):
        raise TraceError("the model is configured as a decoder; neuron_emu.parallel shards encoders only")
    embeddings = getattr(base, "embeddings", None)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if not isinstance(embeddings, nn.Module) or not isinstance(layers, nn.ModuleList) or not len(layers):
        raise TraceError(
            f"{type(hf).__name__} has no embeddings/encoder.layer; neuron_emu.parallel supports BERT, RoBERTa, "
            "XLM-RoBERTa, CamemBERT and ELECTRA question-answering models"
        )
    heads = int(config.num_attention_heads)
    hidden = int(config.hidden_size)
    head_dim = hidden // heads
    parts = tuple(_layer(layer, i, head_dim) for i, layer in enumerate(layers))
    qa_outputs = _linear(hf, "qa_outputs", type(hf).__name__)
    if qa_outputs.out_features != 2:
        raise TraceError(f"qa_outputs has {qa_outputs.out_features} outputs; a QA head has 2 (start, end)")
    project = getattr(base, "embeddings_project", None)
    return EncoderParts(
        model_type=str(getattr(config, "model_type", type(hf).__name__)),
        embeddings=embeddings,
        embeddings_project=project if isinstance(project, nn.Module) else None,
        layers=parts,
        qa_outputs=qa_outputs,
        heads=heads,
        head_dim=head_dim,
        hidden=hidden,
        intermediate=parts[0].ffn_in.out_features,
        uses_token_types=uses_token_types,
    )
