"""The per-rank graphs of one decoder step, cut at every all-reduce (two per layer), as torch modules to trace.

A step runs, on every rank: `embed` (token, learned-position embeddings, OPT's project_in), then per layer
`attention` (norm, this rank's query/key/value heads, RoPE, the KV-cache update, attention, its columns of the
output projection: a partial sum), all-reduce, `mlp` (output bias and residual, norm, this rank's MLP units, its
columns of the down projection: a partial sum), all-reduce, `finish` (down bias and residual; OPT-350m's norms come
after the residual adds), and at the end `head` (final norm, project_out, lm_head). Every graph takes its weights
as inputs after its activations (`names` lists them), so one traced graph serves every layer and every rank, as one
NEFF with sharded weights loaded per rank does in NxD Inference; only `attention` touches the KV cache, the layer's
[batch, kv_heads/tp, max_length, head_dim] keys and values, written in place.

Two kinds, as in NxD Inference: context encoding takes one sequence's prompt padded to a bucket (positions 0..L-1),
writes its keys and values into one batch line of the cache (positions 0..L-1 of that line) and attends causally
among them; the head returns the last real token's logits only. Token generation takes one token for each of the
batch_size lines (fixed at compile time) at its own position, writes its key and value there (idle lines keep
their cache: the graph writes back what it read), attends over the cache up to the bucket, masked per line to its
length, and returns every line's logits.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

Tensor = torch.Tensor
SEGMENTS = ("embed", "attention", "mlp", "finish", "head")


@dataclass(frozen=True)
class GraphSpec:
    """The static facts every graph of one compiled decoder is traced with."""

    family: str
    norm_before: bool
    norm_eps: float
    activation: str
    hidden: int
    heads: int  # per rank
    kv_heads: int  # per rank
    head_dim: int
    batch_size: int
    max_length: int

    @property
    def rope(self) -> bool:
        return self.family == "llama"

    def names(self, segment: str, available: Collection[str]) -> tuple[str, ...]:
        """The weights `segment` takes, in order, of those the model has."""
        norm1, norm2 = ("norm1.weight", "norm1.bias"), ("norm2.weight", "norm2.bias")
        candidates: tuple[str, ...] = {
            "embed": ("embed", "positions", "project_in"),
            "attention": (
                *(norm1 if self.norm_before else ()),
                *("q.weight", "q.bias", "k.weight", "k.bias", "v.weight", "v.bias", "o.weight"),
                *(("rope.cos", "rope.sin") if self.rope else ()),
            ),
            "mlp": (
                "o.bias",
                *(norm2 if self.norm_before else norm1),
                *("gate.weight", "gate.bias", "up.weight", "up.bias", "down.weight"),
            ),
            "finish": ("down.bias", *(() if self.norm_before else norm2)),
            "head": ("final_norm.weight", "final_norm.bias", "project_out", "lm_head"),
        }[segment]
        return tuple(name for name in candidates if name in available)


class Segment(nn.Module):
    """A graph taking `inputs` activations then the weights `names`."""

    inputs = 0

    def __init__(self, spec: GraphSpec, names: tuple[str, ...]) -> None:
        super().__init__()
        self.spec = spec
        self.names = names

    def weights(self, values: tuple[Tensor, ...]) -> dict[str, Tensor]:
        return dict(zip(self.names, values, strict=True))

    def norm(self, x: Tensor, w: dict[str, Tensor], name: str) -> Tensor:
        weight = w[name + ".weight"]
        if self.spec.family == "llama":
            variance = x.pow(2).mean(-1, keepdim=True)
            return weight * (x * torch.rsqrt(variance + self.spec.norm_eps))
        return F.layer_norm(x, (x.shape[-1],), weight, w.get(name + ".bias"), self.spec.norm_eps)


def _linear(x: Tensor, w: dict[str, Tensor], name: str) -> Tensor:
    return F.linear(x, w[name + ".weight"], w.get(name + ".bias"))


def _rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Embed(Segment):
    inputs = 2

    def forward(self, ids: Tensor, positions: Tensor, *weights: Tensor) -> Tensor:
        w = self.weights(weights)
        x = w["embed"][ids]
        if "project_in" in w:
            x = F.linear(x, w["project_in"])
        if "positions" in w:
            x = x + w["positions"][positions]
        return x


class _Attention(Segment):
    def qkv(self, x: Tensor, w: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
        """Query [n, heads, d], key and value [n, kv_heads, d] of this rank's heads (RoPE not applied yet)."""
        s = self.spec
        n = x.shape[0]
        h = self.norm(x, w, "norm1") if s.norm_before else x
        q = _linear(h, w, "q").view(n, s.heads, s.head_dim)
        k = _linear(h, w, "k").view(n, s.kv_heads, s.head_dim)
        v = _linear(h, w, "v").view(n, s.kv_heads, s.head_dim)
        return q, k, v


class ContextAttention(_Attention):
    """x [L, hidden], line [1], keys/values [batch, kv_heads, max_length, d] -> partial [L, hidden]."""

    inputs = 4

    def forward(self, x: Tensor, line: Tensor, keys: Tensor, values: Tensor, *weights: Tensor) -> Tensor:
        s = self.spec
        w = self.weights(weights)
        length = x.shape[0]
        q, k, v = self.qkv(x, w)
        if s.rope:
            cos, sin = w["rope.cos"][:length, None, :], w["rope.sin"][:length, None, :]
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        k, v = k.transpose(0, 1), v.transpose(0, 1)  # [kv_heads, L, d]
        keys[:, :, :length].index_copy_(0, line, k.unsqueeze(0).to(keys.dtype))
        values[:, :, :length].index_copy_(0, line, v.unsqueeze(0).to(values.dtype))
        group = s.heads // s.kv_heads
        query = q.transpose(0, 1).reshape(s.kv_heads, group, length, s.head_dim)
        scores = torch.matmul(query, k.unsqueeze(1).transpose(-1, -2)) * (s.head_dim**-0.5)
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        out = torch.matmul(probs, v.unsqueeze(1))  # [kv_heads, group, L, d]
        out = out.reshape(s.heads, length, s.head_dim).transpose(0, 1).reshape(length, s.heads * s.head_dim)
        return F.linear(out, w["o.weight"])


class TokenAttention(_Attention):
    """x [batch, hidden], positions [batch], active [batch] bool, keys/values -> partial [batch, hidden]."""

    inputs = 5

    def __init__(self, spec: GraphSpec, names: tuple[str, ...], bucket: int) -> None:
        super().__init__(spec, names)
        self.bucket = bucket

    def forward(
        self, x: Tensor, positions: Tensor, active: Tensor, keys: Tensor, values: Tensor, *weights: Tensor
    ) -> Tensor:
        s = self.spec
        w = self.weights(weights)
        batch = x.shape[0]
        q, k, v = self.qkv(x, w)
        if s.rope:
            cos, sin = w["rope.cos"][positions][:, None, :], w["rope.sin"][positions][:, None, :]
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        index = positions.view(batch, 1, 1, 1).expand(batch, s.kv_heads, 1, s.head_dim)
        keep = active.view(batch, 1, 1, 1)
        keys.scatter_(2, index, torch.where(keep, k.unsqueeze(2).to(keys.dtype), keys.gather(2, index)))
        values.scatter_(2, index, torch.where(keep, v.unsqueeze(2).to(values.dtype), values.gather(2, index)))
        cached_k = keys[:, :, : self.bucket].to(torch.float32)  # [batch, kv_heads, bucket, d]
        cached_v = values[:, :, : self.bucket].to(torch.float32)
        query = q.view(batch, s.kv_heads, s.heads // s.kv_heads, s.head_dim)
        scores = torch.matmul(query, cached_k.transpose(-1, -2)) * (s.head_dim**-0.5)
        visible = torch.arange(self.bucket)[None, :] <= positions[:, None]  # [batch, bucket]
        probs = torch.softmax(scores.masked_fill(~visible[:, None, None, :], float("-inf")), dim=-1)
        out = torch.matmul(probs, cached_v)  # [batch, kv_heads, group, d]
        return F.linear(out.reshape(batch, s.heads * s.head_dim), w["o.weight"])


class Mlp(Segment):
    """x, the all-reduced attention output -> (x after attention, this rank's MLP partial sum)."""

    inputs = 2

    def forward(self, x: Tensor, reduced: Tensor, *weights: Tensor) -> tuple[Tensor, Tensor]:
        s = self.spec
        w = self.weights(weights)
        x = x + (reduced + w["o.bias"] if "o.bias" in w else reduced)
        if not s.norm_before:
            x = self.norm(x, w, "norm1")
        h = self.norm(x, w, "norm2") if s.norm_before else x
        if s.family == "llama":
            up = F.silu(_linear(h, w, "gate")) * _linear(h, w, "up")
        elif s.activation == "relu":
            up = F.relu(_linear(h, w, "up"))
        else:
            up = F.gelu(_linear(h, w, "up"), approximate="tanh")
        return x, F.linear(up, w["down.weight"])


class Finish(Segment):
    """x after attention, the all-reduced MLP output -> the layer's output."""

    inputs = 2

    def forward(self, x: Tensor, reduced: Tensor, *weights: Tensor) -> Tensor:
        w = self.weights(weights)
        x = x + (reduced + w["down.bias"] if "down.bias" in w else reduced)
        return x if self.spec.norm_before else self.norm(x, w, "norm2")


class Head(Segment):
    """Context encoding: x [L, hidden], last [1] -> logits [1, vocab]; token generation: x -> logits [batch, vocab]."""

    def __init__(self, spec: GraphSpec, names: tuple[str, ...], context: bool) -> None:
        super().__init__(spec, names)
        self.context = context
        self.inputs = 2 if context else 1

    def forward(self, x: Tensor, *rest: Tensor) -> Tensor:
        if self.context:
            x = x.index_select(0, rest[0])
        w = self.weights(rest[self.inputs - 1 :])
        if "final_norm.weight" in w:
            x = self.norm(x, w, "final_norm")
        if "project_out" in w:
            x = F.linear(x, w["project_out"])
        return F.linear(x, w["lm_head"])


def segment(spec: GraphSpec, name: str, available: Collection[str], *, context: bool, bucket: int) -> Segment:
    """The module of segment `name` for one kind and bucket, in eval mode."""
    names = spec.names(name, available)
    module: Segment
    if name == "attention":
        module = ContextAttention(spec, names) if context else TokenAttention(spec, names, bucket)
    elif name == "head":
        module = Head(spec, names, context)
    else:
        module = {"embed": Embed, "mlp": Mlp, "finish": Finish}[name](spec, names)
    return module.eval()
