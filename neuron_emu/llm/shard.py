"""Tensor parallelism of a decoder as NxD Inference lays it out: what each of tp ranks (NeuronCores) holds.

Per layer: query, key and value are column-parallel (each rank computes heads/tp query heads), the attention
output projection row-parallel (each rank multiplies its heads' columns: a partial sum), the MLP's up (and Llama's
gate) projections column-parallel and its down projection row-parallel; the ranks all-reduce (sum) each partial sum,
then add the row-parallel layer's bias once. Grouped-query attention: the key/value heads are split among the ranks
when tp <= kv_heads (kv_heads/tp each), replicated when tp > kv_heads (tp a multiple of kv_heads: each key/value
head serves tp/kv_heads ranks, the one holding its query heads), as NxD's GQA sharding strategy
REPLICATE_TO_TP_DEGREE does. Replicated on every rank: the embeddings (and learned positions, OPT's project_in and
project_out), the norms, the row-parallel biases, the RoPE tables and the lm_head (whole vocabulary on each rank:
no vocab-parallel gather).

NxD's rule for the degree: it must divide the attention heads. The degrees an instance family's NeuronLink allows
come from neuron_emu.hardware.tensor_parallel_degrees; whether the instance has that many NeuronCores is the
planner's concern, not the compiler's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from neuron_emu.errors import NeuronEmuError
from neuron_emu.hardware import tensor_parallel_degrees
from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.errors import DecoderCompileError
from neuron_emu.llm.weights import LayerWeights, ModelWeights, Pair, rope_tables

Tensor = torch.Tensor


@dataclass(frozen=True)
class Layout:
    """How tp ranks split the model: per-rank head and MLP widths."""

    tp_degree: int
    heads: int  # query heads per rank
    kv_heads: int  # key/value heads per rank (1 when replicated)
    head_dim: int
    intermediate: int  # MLP width per rank
    kv_replicated: bool

    def kv_head_start(self, rank: int, kv_heads: int) -> int:
        """The first (global) key/value head rank `rank` holds."""
        if self.kv_replicated:
            return rank // (self.tp_degree // kv_heads)
        return rank * self.kv_heads


def _listed_degrees() -> set[int]:
    return {degree for family in ("inf2", "trn1") for degree in tensor_parallel_degrees(family)}


def check_degree(config: DecoderConfig, tp_degree: object, instance_family: str | None = None) -> Layout:
    """The layout of `tp_degree` ranks, or DecoderCompileError saying why the model cannot be split so."""
    if isinstance(tp_degree, bool) or not isinstance(tp_degree, int) or tp_degree < 1:
        raise DecoderCompileError(f"tp_degree must be a positive integer, got {tp_degree!r}")
    degree = tp_degree
    if instance_family is not None:
        family = "trn1" if instance_family == "trn1n" else instance_family  # trn1n: trn1's chips and links
        try:
            allowed = tensor_parallel_degrees(family)
        except NeuronEmuError as exc:
            raise DecoderCompileError(str(exc)) from None
        if degree not in allowed:
            listed = ", ".join(str(d) for d in allowed)
            raise DecoderCompileError(
                f"tp_degree {degree} is not a tensor-parallel degree of {instance_family} instances ({listed})"
            )
    elif degree & (degree - 1) and degree not in _listed_degrees():
        listed = ", ".join(str(d) for d in sorted(_listed_degrees()))
        raise DecoderCompileError(f"tp_degree {degree} is neither a power of two nor a listed degree ({listed})")
    if config.heads % degree:
        raise DecoderCompileError(
            f"tp_degree {degree} does not divide the model's {config.heads} attention heads (NxD splits whole heads)"
        )
    kv = config.kv_heads
    if degree <= kv and kv % degree:
        raise DecoderCompileError(f"tp_degree {degree} does not divide the model's {kv} key/value heads")
    if degree > kv and degree % kv:
        raise DecoderCompileError(
            f"tp_degree {degree} is above the model's {kv} key/value heads but not a multiple of them "
            "(each key/value head must be replicated to the same number of ranks)"
        )
    if config.intermediate_size % degree:
        raise DecoderCompileError(
            f"tp_degree {degree} does not divide the model's MLP width {config.intermediate_size}"
        )
    return Layout(
        tp_degree=degree,
        heads=config.heads // degree,
        kv_heads=max(kv // degree, 1),
        head_dim=config.head_dim,
        intermediate=config.intermediate_size // degree,
        kv_replicated=degree > kv,
    )


@dataclass(frozen=True)
class RankWeights:
    """What one rank holds: `model` (replicated, model-wide) and per layer its shard plus the layer's replicated
    norms and row-parallel biases. Replicated tensors are the same objects on every rank of one process."""

    model: dict[str, Tensor]
    layers: tuple[dict[str, Tensor], ...]


def _put(out: dict[str, Tensor], name: str, pair: Pair | None) -> None:
    if pair is None:
        return
    out[name + ".weight"] = pair[0]
    if pair[1] is not None:
        out[name + ".bias"] = pair[1]


def _rows(pair: Pair, start: int, count: int) -> Pair:
    weight, bias = pair
    rows = slice(start, start + count)
    return weight[rows].contiguous(), bias[rows].contiguous() if bias is not None else None


def _layer(layer: LayerWeights, layout: Layout, rank: int, kv_heads: int) -> dict[str, Tensor]:
    hd = layout.head_dim
    out: dict[str, Tensor] = {}
    _put(out, "norm1", layer.norm1)
    _put(out, "q", _rows(layer.q, rank * layout.heads * hd, layout.heads * hd))
    kv_start = layout.kv_head_start(rank, kv_heads) * hd
    _put(out, "k", _rows(layer.k, kv_start, layout.kv_heads * hd))
    _put(out, "v", _rows(layer.v, kv_start, layout.kv_heads * hd))
    columns = slice(rank * layout.heads * hd, (rank + 1) * layout.heads * hd)
    out["o.weight"] = layer.o[0][:, columns].contiguous()
    if layer.o[1] is not None:
        out["o.bias"] = layer.o[1]
    _put(out, "norm2", layer.norm2)
    width = layout.intermediate
    if layer.gate is not None:
        _put(out, "gate", _rows(layer.gate, rank * width, width))
    _put(out, "up", _rows(layer.up, rank * width, width))
    out["down.weight"] = layer.down[0][:, rank * width : (rank + 1) * width].contiguous()
    if layer.down[1] is not None:
        out["down.bias"] = layer.down[1]
    return out


REPLICATED_LAYER_NAMES = ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "o.bias", "down.bias")


def model_level(config: DecoderConfig, model: ModelWeights, max_length: int) -> dict[str, Tensor]:
    """The replicated, model-wide tensors: embeddings, positions or RoPE tables, projections, final norm, lm_head."""
    out: dict[str, Tensor] = {"embed": model.embed, "lm_head": model.lm_head}
    if model.positions is not None:
        out["positions"] = model.positions[:max_length].contiguous()
    if model.project_in is not None:
        out["project_in"] = model.project_in
    if model.project_out is not None:
        out["project_out"] = model.project_out
    _put(out, "final_norm", model.final_norm)
    if config.family == "llama":
        out["rope.cos"], out["rope.sin"] = rope_tables(config, max_length)
    return out


def shard(config: DecoderConfig, model: ModelWeights, layout: Layout, max_length: int) -> list[RankWeights]:
    """Every rank's weights; replicated tensors (model-wide and per layer) are the same objects on every rank."""
    replicated = model_level(config, model, max_length)
    return [
        RankWeights(replicated, tuple(_layer(layer, layout, rank, config.kv_heads) for layer in model.layers))
        for rank in range(layout.tp_degree)
    ]
