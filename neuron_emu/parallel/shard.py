"""Megatron-style tensor parallelism of a BERT-family encoder: one rank's graphs, cut at every all-reduce.

Per layer, each of N ranks holds heads/N attention heads (query/key/value split by output rows: column-parallel)
and the matching input columns of the attention output projection (row-parallel), then intermediate/N rows of the
first feed-forward matrix (column-parallel) and the matching columns of the second (row-parallel). A row-parallel
projection yields a partial sum; the ranks all-reduce it and each adds the bias, the residual and the LayerNorm
itself (replicated), as in Megatron-LM (Shoeybi et al. 2019, https://arxiv.org/abs/1909.08053, section 3).
BERT's and DistilBERT's post-LayerNorm layers split the same way. The embeddings and the head (every parameter
outside the encoder's layers: pooler, task head, a wrapper's own modules) are replicated.

The graphs of one rank are "segments" separated by the all-reduces (2 per layer):
segment 0 embeds and starts layer 0's attention; then alternately a segment finishes an attention block and
starts the feed-forward, or finishes a feed-forward and starts the next attention; the last one finishes the last
feed-forward and runs the head (neuron_emu.parallel.head: the model's own forward with the encoder stubbed).
Segment 0 takes the model's inputs (input_ids, attention_mask[, token_type_ids]); every segment but the last
returns (hidden, mask bias, partial sum) and every segment after the first takes the previous segment's hidden
and mask bias and the all-reduced partial sum; the last one also takes the model's inputs again (the head may
use them, e.g. the attention mask for mean pooling) and returns the model's outputs as a tuple of tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from neuron_emu.compiler_args import CompilerOptions
from neuron_emu.errors import TraceError
from neuron_emu.parallel.encoder import EncoderParts, LayerParts
from neuron_emu.parallel.head import HeadModel

Tensor = torch.Tensor


def divisors(value: int) -> list[int]:
    return [d for d in range(1, value + 1) if value % d == 0]


def check_degree(parts: EncoderParts, degree: object) -> int:
    """The tensor-parallel degree, if it splits the model's heads and feed-forward evenly."""
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
        raise TraceError(f"tp_degree must be a positive integer, got {degree!r}")
    if parts.heads % degree:
        choices = ", ".join(str(d) for d in divisors(parts.heads))
        raise TraceError(
            f"tp_degree {degree} does not divide the model's {parts.heads} attention heads (choose one of {choices})"
        )
    if parts.intermediate % degree:
        raise TraceError(f"tp_degree {degree} does not divide the feed-forward size {parts.intermediate}")
    return degree


def _slice_linear(linear: nn.Linear, *, rows: slice | None = None, cols: slice | None = None, bias: bool) -> nn.Linear:
    weight = linear.weight.detach()
    weight = weight[rows] if rows is not None else weight[:, cols]
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias and linear.bias is not None)
    with torch.no_grad():
        out.weight.copy_(weight)
        if out.bias is not None and linear.bias is not None:
            out.bias.copy_(linear.bias.detach()[rows] if rows is not None else linear.bias.detach())
    return out.eval()


class AttentionShard(nn.Module):
    """heads/N attention heads and their slice of the output projection; returns a partial sum (no bias)."""

    def __init__(self, layer: LayerParts, heads: int, head_dim: int, rank: int) -> None:
        super().__init__()
        width = heads * head_dim
        rows = slice(rank * width, (rank + 1) * width)
        self.query = _slice_linear(layer.query, rows=rows, bias=True)
        self.key = _slice_linear(layer.key, rows=rows, bias=True)
        self.value = _slice_linear(layer.value, rows=rows, bias=True)
        self.out = _slice_linear(layer.attention_out, cols=rows, bias=False)
        self.heads = heads
        self.head_dim = head_dim
        self.scaling = layer.scaling

    def forward(self, hidden: Tensor, mask_bias: Tensor) -> Tensor:
        batch, length = hidden.shape[0], hidden.shape[1]
        shape = (batch, length, self.heads, self.head_dim)
        query = self.query(hidden).view(shape).transpose(1, 2)
        key = self.key(hidden).view(shape).transpose(1, 2)
        value = self.value(hidden).view(shape).transpose(1, 2)
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=mask_bias, scale=self.scaling)
        context = context.transpose(1, 2).reshape(batch, length, self.heads * self.head_dim)
        partial: Tensor = self.out(context)
        return partial


class FeedForwardShard(nn.Module):
    """intermediate/N feed-forward units; returns a partial sum (no bias)."""

    def __init__(self, layer: LayerParts, width: int, rank: int) -> None:
        super().__init__()
        rows = slice(rank * width, (rank + 1) * width)
        self.ffn_in = _slice_linear(layer.ffn_in, rows=rows, bias=True)
        self.ffn_out = _slice_linear(layer.ffn_out, cols=rows, bias=False)
        self.activation = layer.activation

    def forward(self, hidden: Tensor) -> Tensor:
        partial: Tensor = self.ffn_out(self.activation(self.ffn_in(hidden)))
        return partial


class Finish(nn.Module):
    """After an all-reduce: add the projection's bias and the residual, then LayerNorm (on every rank)."""

    def __init__(self, projection: nn.Linear, norm: nn.LayerNorm) -> None:
        super().__init__()
        bias = projection.bias.detach().clone() if projection.bias is not None else torch.zeros(projection.out_features)
        self.bias = nn.Parameter(bias, requires_grad=False)
        self.norm = norm

    def forward(self, reduced: Tensor, residual: Tensor) -> Tensor:
        out: Tensor = self.norm(reduced + self.bias + residual)
        return out


def mask_bias(attention_mask: Tensor) -> Tensor:
    """[batch, seq] 1/0 mask -> additive [batch, 1, 1, seq] bias (0 where attended, dtype minimum elsewhere)."""
    keep = attention_mask[:, None, None, :].to(torch.float32)
    return (1.0 - keep) * torch.finfo(torch.float32).min


class EmbeddingSegment(nn.Module):
    """Embed (replicated) and start layer 0's attention. `uses_token_types`: whether token_type_ids reach the
    embeddings (else they get None and use type 0, as when the model's forward does not pass them on)."""

    def __init__(self, parts: EncoderParts, attention: AttentionShard) -> None:
        super().__init__()
        self.embeddings = parts.embeddings
        self.project = parts.embeddings_project
        self.attention = attention
        self.layout = parts.layout
        self.uses_token_types = parts.uses_token_types

    def forward(self, input_ids: Tensor, attention_mask: Tensor, *rest: Tensor) -> tuple[Tensor, ...]:
        if self.layout == "distilbert":
            hidden = self.embeddings(input_ids)
        else:
            token_types = rest[0] if rest and self.uses_token_types else None
            hidden = self.embeddings(input_ids=input_ids, token_type_ids=token_types)
        if self.project is not None:
            hidden = self.project(hidden)
        bias = mask_bias(attention_mask)
        return hidden, bias, self.attention(hidden, bias)


class AttentionSegment(nn.Module):
    """Finish the previous feed-forward, start this layer's attention."""

    def __init__(self, finish: Finish, attention: AttentionShard) -> None:
        super().__init__()
        self.finish = finish
        self.attention = attention

    def forward(self, residual: Tensor, bias: Tensor, reduced: Tensor) -> tuple[Tensor, ...]:
        hidden = self.finish(reduced, residual)
        return hidden, bias, self.attention(hidden, bias)


class FeedForwardSegment(nn.Module):
    """Finish this layer's attention, start its feed-forward."""

    def __init__(self, finish: Finish, feed_forward: FeedForwardShard) -> None:
        super().__init__()
        self.finish = finish
        self.feed_forward = feed_forward

    def forward(self, residual: Tensor, bias: Tensor, reduced: Tensor) -> tuple[Tensor, ...]:
        hidden = self.finish(reduced, residual)
        return hidden, bias, self.feed_forward(hidden)


class HeadSegment(nn.Module):
    """Finish the last feed-forward and run the (replicated) head on the final hidden state and the model's inputs."""

    def __init__(self, finish: Finish, head: HeadModel) -> None:
        super().__init__()
        self.finish = finish
        self.head = head

    def forward(self, residual: Tensor, bias: Tensor, reduced: Tensor, *inputs: Tensor) -> tuple[Tensor, ...]:
        outputs: tuple[Tensor, ...] = self.head(self.finish(reduced, residual), *inputs)
        return outputs


def rank_segments(parts: EncoderParts, degree: int, rank: int, head: HeadModel | None = None) -> list[nn.Module]:
    """The 2 * layers + 1 graphs rank `rank` of `degree` runs, in order (eval mode). Ranks may share one `head`
    (it is replicated; sharing it lets a caller see how often the model's forward reached the stubbed encoder)."""
    check_degree(parts, degree)
    if not 0 <= rank < degree:
        raise TraceError(f"rank {rank} is outside tp_degree {degree}")
    heads = parts.heads // degree
    width = parts.intermediate // degree
    layers = parts.layers
    segments: list[nn.Module] = [EmbeddingSegment(parts, AttentionShard(layers[0], heads, parts.head_dim, rank))]
    for index, layer in enumerate(layers):
        segments.append(
            FeedForwardSegment(Finish(layer.attention_out, layer.attention_norm), FeedForwardShard(layer, width, rank))
        )
        finish = Finish(layer.ffn_out, layer.ffn_norm)
        if index + 1 < len(layers):
            segments.append(AttentionSegment(finish, AttentionShard(layers[index + 1], heads, parts.head_dim, rank)))
        else:
            segments.append(HeadSegment(finish, head if head is not None else HeadModel(parts)))
    return [segment.eval() for segment in segments]


def run_stepwise(
    segments_per_rank: Sequence[Sequence[nn.Module]], inputs: tuple[Tensor, ...]
) -> tuple[list[tuple[Tensor, ...]], tuple[Tensor, ...]]:
    """Run every rank's segments in this process, summing partials as the all-reduce would: each segment's inputs
    (rank 0's, the examples to trace every rank's segment with) and the outputs."""
    examples: list[tuple[Tensor, ...]] = [inputs]
    states = [segments[0](*inputs) for segments in segments_per_rank]
    last = len(segments_per_rank[0]) - 1
    for step in range(1, last + 1):
        reduced = torch.stack([state[2] for state in states]).sum(0)
        extra = inputs if step == last else ()
        examples.append((states[0][0], states[0][1], reduced, *extra))
        states = [
            segments[step](state[0], state[1], reduced, *extra)
            for segments, state in zip(segments_per_rank, states, strict=True)
        ]
    return examples, tuple(states[0])


def set_token_types(segments_per_rank: Sequence[Sequence[nn.Module]], enabled: bool) -> None:
    """Whether every rank's segment 0 hands token_type_ids to the embeddings."""
    for segments in segments_per_rank:
        first = segments[0]
        assert isinstance(first, EmbeddingSegment)
        first.uses_token_types = enabled


def run_in_process(segments_per_rank: Sequence[Sequence[nn.Module]], inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """Run every rank's segments in this process, summing partials as the all-reduce would (for checks)."""
    return run_stepwise(segments_per_rank, inputs)[1]


@dataclass(frozen=True)
class WeightSplit:
    """Bytes of weights every rank holds (replicated) and bytes divided among the ranks (sharded), as stored."""

    replicated_bytes: int
    sharded_bytes: int

    def per_core(self, degree: int) -> float:
        return self.replicated_bytes + self.sharded_bytes / degree


def _stored(tensor: Tensor, matmul_operand: bool, options: CompilerOptions) -> int:
    # Auto-cast stores fp32 matmul weights in the cast type (`all`: every fp32 weight), as the cost plans assume.
    cast = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8_e4m3": 1}[options.auto_cast_type]
    size = tensor.element_size()
    if tensor.dtype == torch.float32 and (options.casts_all or (options.casts_matmul and matmul_operand)):
        size = cast
    return tensor.numel() * size


def weight_split(parts: EncoderParts, options: CompilerOptions) -> WeightSplit:
    """Which weights tensor parallelism divides and which every core keeps whole.

    Sharded: the layers' query/key/value and first feed-forward matrices with their biases, and the weights of the
    row-parallel projections. Replicated: every other parameter of the model (the row-parallel biases, the
    LayerNorms, the embeddings and the head, whatever it is), each counted once however often it is shared.
    """
    sharded_ids: set[int] = set()
    for layer in parts.layers:
        for linear in (layer.query, layer.key, layer.value, layer.ffn_in):
            sharded_ids.update(id(p) for p in linear.parameters())
        sharded_ids.update((id(layer.attention_out.weight), id(layer.ffn_out.weight)))
    # Linear layers' parameters are matmul operands (auto-cast stores them in the cast type); the rest are not.
    linear_ids = {id(p) for m in parts.model.modules() if isinstance(m, nn.Linear) for p in m.parameters()}
    sharded = 0
    replicated = 0
    for parameter in parts.model.parameters():
        if id(parameter) in sharded_ids:
            sharded += _stored(parameter, True, options)
        else:
            replicated += _stored(parameter, id(parameter) in linear_ids, options)
    return WeightSplit(replicated_bytes=replicated, sharded_bytes=sharded)
