"""Where the BERT-family encoder sits in a model, and the parts of it that tensor parallelism splits or replicates.

Supported: any torch module holding exactly one Hugging Face base encoder, found in its module tree
(`model.named_modules()`) under any attribute name at any depth, or the model itself. An encoder is a module with
`embeddings` and a layer stack of one of two layouts:
- BERT's: `encoder.layer[i]` with `attention.self.{query,key,value}`, `attention.output.{dense,LayerNorm}`,
  `intermediate.dense` (+ `intermediate_act_fn`), `output.{dense,LayerNorm}`: BERT, RoBERTa, XLM-RoBERTa, CamemBERT,
  ELECTRA (whose `embeddings_project` is replicated with the embeddings);
- DistilBERT's: `transformer.layer[i]` with `attention.{q_lin,k_lin,v_lin,out_lin}`, `sa_layer_norm`,
  `ffn.{lin1,lin2}` (+ `ffn.activation`), `output_layer_norm` (post-LayerNorm like BERT; no token types).
Whatever the model does around the encoder (pooler, task head, a wrapper's pooling) is "the head": every parameter
outside the encoder's layers, replicated and run by the last segment (neuron_emu.parallel.head).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from neuron_emu.errors import TraceError

SUPPORTED = "BERT, RoBERTa, XLM-RoBERTa, CamemBERT, ELECTRA or DistilBERT"
# The attribute of an encoder holding its layer stack, and the layer layout that attribute implies.
STACKS = {"encoder": "bert", "transformer": "distilbert"}


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
    heads: int
    head_dim: int


@dataclass(frozen=True)
class EncoderParts:
    """The encoder found in `model` and what the sharding needs to know about it.

    `uses_token_types`: whether the model's forward hands token_type_ids on to the encoder. The model's own
    `uses_token_types` attribute says so when it has one (`token_types_declared`); otherwise this is a first guess
    (whether the embeddings have token types at all) that neuron_emu.parallel.trace settles by comparing outputs.
    """

    model: nn.Module
    path: str
    layout: str
    model_type: str
    embeddings: nn.Module
    embeddings_project: nn.Module | None
    stack_name: str
    layers: tuple[LayerParts, ...]
    heads: int
    head_dim: int
    hidden: int
    intermediate: int
    token_type_vocab: int
    uses_token_types: bool
    token_types_declared: bool

    def describe(self) -> dict[str, Any]:
        return {
            "model_type": self.model_type,
            "model_class": type(self.model).__name__,
            "encoder_path": self.path,
            "layout": self.layout,
            "layers": len(self.layers),
            "hidden": self.hidden,
            "heads": self.heads,
            "head_dim": self.head_dim,
            "intermediate": self.intermediate,
            "uses_token_types": self.uses_token_types,
        }


def _stack_name(module: nn.Module) -> str | None:
    """The layer-stack attribute if `module` looks like a BERT-family base encoder, else None."""
    if not isinstance(getattr(module, "embeddings", None), nn.Module):
        return None
    for name in STACKS:
        stack = getattr(module, name, None)
        if isinstance(stack, nn.Module) and isinstance(getattr(stack, "layer", None), nn.ModuleList):
            return name
    return None


def find_encoders(model: nn.Module) -> list[tuple[str, nn.Module, str]]:
    """Every (dotted path, module, layer-stack attribute) in `model`'s tree that looks like a BERT-family encoder."""
    found: list[tuple[str, nn.Module, str]] = []
    for path, module in model.named_modules():
        stack = _stack_name(module)
        if stack is not None:
            found.append((path, module, stack))
    return found


def _where(path: str) -> str:
    return repr(path) if path else "the model itself"


def _linear(module: Any, name: str, where: str) -> nn.Linear:
    found = getattr(module, name, None)
    if not isinstance(found, nn.Linear):
        raise TraceError(f"{where}.{name} is not a torch.nn.Linear; neuron_emu.parallel cannot shard this layer layout")
    return found


def _norm(module: Any, name: str, where: str) -> nn.LayerNorm:
    found = getattr(module, name, None)
    if not isinstance(found, nn.LayerNorm):
        raise TraceError(f"{where}.{name} is not a torch.nn.LayerNorm; neuron_emu.parallel cannot shard this layout")
    return found


def _heads(attention: Any, query: nn.Linear, config: Any, where: str) -> tuple[int, int]:
    """(attention heads, head size) from the attention module, else the config."""
    heads = getattr(attention, "num_attention_heads", None) or getattr(attention, "n_heads", None)
    heads = heads or getattr(config, "num_attention_heads", None)
    if not isinstance(heads, int) or heads < 1 or query.out_features % heads:
        raise TraceError(f"{where}: cannot tell its attention heads ({heads!r} for {query.out_features} features)")
    head_dim = getattr(attention, "attention_head_size", None) or query.out_features // heads
    if head_dim * heads != query.out_features:
        raise TraceError(f"{where}: {heads} heads of size {head_dim} do not make {query.out_features} features")
    return heads, int(head_dim)


def _bert_layer(layer: nn.Module, where: str, config: Any) -> LayerParts:
    attention = getattr(layer, "attention", None)
    attn_self = getattr(attention, "self", None)
    attn_out = getattr(attention, "output", None)
    intermediate = getattr(layer, "intermediate", None)
    output = getattr(layer, "output", None)
    if attn_self is None or attn_out is None or intermediate is None or output is None:
        raise TraceError(
            f"{where} is not a BERT-style layer (attention.self, attention.output, intermediate, output); "
            f"neuron_emu.parallel shards {SUPPORTED} encoders"
        )
    decoder = getattr(layer, "add_cross_attention", False) or getattr(layer, "is_decoder", False)
    if decoder or getattr(attn_self, "is_decoder", False) or getattr(attn_self, "is_causal", False):
        raise TraceError(f"{where} is a decoder layer; neuron_emu.parallel shards encoders only")
    activation = getattr(intermediate, "intermediate_act_fn", None)
    if not callable(activation):
        raise TraceError(f"{where}.intermediate has no intermediate_act_fn")
    query = _linear(attn_self, "query", f"{where}.attention.self")
    heads, head_dim = _heads(attn_self, query, config, f"{where}.attention.self")
    return LayerParts(
        query=query,
        key=_linear(attn_self, "key", f"{where}.attention.self"),
        value=_linear(attn_self, "value", f"{where}.attention.self"),
        attention_out=_linear(attn_out, "dense", f"{where}.attention.output"),
        attention_norm=_norm(attn_out, "LayerNorm", f"{where}.attention.output"),
        ffn_in=_linear(intermediate, "dense", f"{where}.intermediate"),
        activation=activation,
        ffn_out=_linear(output, "dense", f"{where}.output"),
        ffn_norm=_norm(output, "LayerNorm", f"{where}.output"),
        scaling=float(getattr(attn_self, "scaling", head_dim**-0.5)),
        heads=heads,
        head_dim=head_dim,
    )


def _distilbert_layer(layer: nn.Module, where: str, config: Any) -> LayerParts:
    attention = getattr(layer, "attention", None)
    ffn = getattr(layer, "ffn", None)
    if attention is None or ffn is None:
        raise TraceError(
            f"{where} is not a DistilBERT-style layer (attention, sa_layer_norm, ffn, output_layer_norm); "
            f"neuron_emu.parallel shards {SUPPORTED} encoders"
        )
    if getattr(attention, "is_causal", False):
        raise TraceError(f"{where} is a decoder layer; neuron_emu.parallel shards encoders only")
    activation = getattr(ffn, "activation", None)
    if not callable(activation):
        raise TraceError(f"{where}.ffn has no activation")
    query = _linear(attention, "q_lin", f"{where}.attention")
    heads, head_dim = _heads(attention, query, config, f"{where}.attention")
    return LayerParts(
        query=query,
        key=_linear(attention, "k_lin", f"{where}.attention"),
        value=_linear(attention, "v_lin", f"{where}.attention"),
        attention_out=_linear(attention, "out_lin", f"{where}.attention"),
        attention_norm=_norm(layer, "sa_layer_norm", where),
        ffn_in=_linear(ffn, "lin1", f"{where}.ffn"),
        activation=activation,
        ffn_out=_linear(ffn, "lin2", f"{where}.ffn"),
        ffn_norm=_norm(layer, "output_layer_norm", where),
        scaling=float(getattr(attention, "scaling", head_dim**-0.5)),
        heads=heads,
        head_dim=head_dim,
    )


def _the_encoder(model: nn.Module) -> tuple[str, nn.Module, str]:
    """The one encoder in `model`'s module tree; none or several is a refusal naming what was found."""
    found = find_encoders(model)
    name = type(model).__name__
    if not found:
        raise TraceError(
            f"found no BERT-family encoder in {name}: neuron_emu.parallel shards a model holding one Hugging Face "
            f"{SUPPORTED} encoder (a module with embeddings and encoder.layer or transformer.layer)"
        )
    if len(found) > 1:
        places = ", ".join(f"{type(module).__name__} at {_where(path)}" for path, module, _ in found)
        raise TraceError(
            f"found {len(found)} BERT-family encoders in {name} ({places}); neuron_emu.parallel shards a model "
            "with exactly one"
        )
    return found[0]


def _check_config(config: Any, where: str) -> None:
    position_type = getattr(config, "position_embedding_type", "absolute") or "absolute"
    if position_type != "absolute":
        raise TraceError(
            f"the encoder at {where} uses position_embedding_type {position_type!r}; neuron_emu.parallel supports "
            "absolute position embeddings only"
        )
    if getattr(config, "is_decoder", False):
        raise TraceError(f"the encoder at {where} is configured as a decoder; neuron_emu.parallel shards encoders only")


def _token_type_vocab(embeddings: nn.Module, layout: str) -> int:
    table = getattr(embeddings, "token_type_embeddings", None)
    if layout != "bert" or not isinstance(table, nn.Embedding):
        return 0
    return int(table.num_embeddings)


def _layer_parts(base: nn.Module, path: str, stack_name: str, config: Any) -> tuple[LayerParts, ...]:
    """Every layer of the encoder's stack, parsed by the layout its stack attribute implies; all of one shape."""
    where = _where(path)
    layer_of = _bert_layer if STACKS[stack_name] == "bert" else _distilbert_layer
    prefix = f"{path}." if path else ""
    layers = base.get_submodule(f"{stack_name}.layer")
    if not isinstance(layers, nn.ModuleList) or not len(layers):
        raise TraceError(f"the encoder at {where} has no layers")
    parts = tuple(layer_of(layer, f"{prefix}{stack_name}.layer[{i}]", config) for i, layer in enumerate(layers))
    shapes = {(p.heads, p.head_dim, p.ffn_in.out_features, p.query.in_features) for p in parts}
    if len(shapes) != 1:
        raise TraceError(f"the encoder at {where} has layers of different shapes; neuron_emu.parallel needs one shape")
    return parts


def encoder_parts(model: nn.Module) -> EncoderParts:
    """Find the one encoder of `model` and its layers, refusing layouts the sharding does not know."""
    if not isinstance(model, nn.Module):
        raise TraceError(f"neuron_emu.parallel.trace needs a torch.nn.Module, got {type(model).__name__}")
    if model.training:
        raise TraceError("call model.eval() before tracing: a NeuronCore graph is inference-only")
    path, base, stack_name = _the_encoder(model)
    where = _where(path)
    config = getattr(base, "config", None)
    if config is None:
        raise TraceError(f"the encoder at {where} ({type(base).__name__}) is not a Hugging Face model (no config)")
    _check_config(config, where)
    layout = STACKS[stack_name]
    parts = _layer_parts(base, path, stack_name, config)
    first = parts[0]
    embeddings = base.get_submodule("embeddings")
    project = getattr(base, "embeddings_project", None)
    vocab = _token_type_vocab(embeddings, layout)
    declared = declared_token_types(model, path)
    return EncoderParts(
        model=model,
        path=path,
        layout=layout,
        model_type=str(getattr(config, "model_type", type(base).__name__)),
        embeddings=embeddings,
        embeddings_project=project if isinstance(project, nn.Module) else None,
        stack_name=stack_name,
        layers=parts,
        heads=first.heads,
        head_dim=first.head_dim,
        hidden=first.query.in_features,
        intermediate=first.ffn_in.out_features,
        token_type_vocab=vocab,
        uses_token_types=vocab > 0 and declared is not False,
        token_types_declared=declared is not None,
    )


def declared_token_types(model: nn.Module, path: str) -> bool | None:
    """A `uses_token_types` flag the model (or a module on the way to its encoder) declares, outermost first."""
    module = model
    chain = [module]
    for name in path.split(".") if path else []:
        module = module.get_submodule(name)
        chain.append(module)
    for candidate in chain:
        value = getattr(candidate, "uses_token_types", None)
        if isinstance(value, bool):
            return value
    return None
