"""A decoder LLM forward pass over a ragged batch, in PyTorch eager, with the key/value cache in fixed slots.

One step takes the tokens of several sequences at once, each a segment: a prompt chunk being prefilled, or the one
token a running sequence decodes. Every linear layer runs once over all the step's tokens (each weight is read once
per step, whatever the batch), attention runs per kind of segment:
- every one-token segment together, against the cache of all slots up to the longest length in use (a view of the
  cache, no copy: gathering the batch's slots would copy the whole cache every step), masked per slot;
- each longer segment (a prompt chunk) alone, causally against its own slot's earlier tokens.
The cache holds `slots` sequences of up to `max_len` tokens, zeroed when allocated (so resident from the start: its
size is the memory budget): attention reads positions of other slots and past a slot's length under a mask, and a
masked weight of 0 times a never-written NaN would still be NaN. Weights are transformers' own names and layouts
(config.py lists the families); query, key and value are fused into one matrix, as are Llama's gate and up
projections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from neuron_emu.llm.config import DecoderConfig, UnsupportedModel


@dataclass(frozen=True)
class Segment:
    slot: int  # the cache slot of the sequence
    start: int  # position of the segment's first token (tokens of the sequence already in the cache)
    length: int  # tokens in this step


class KVCache:
    def __init__(self, config: DecoderConfig, slots: int, max_len: int, dtype: torch.dtype = torch.float32) -> None:
        shape = (config.layers, slots, config.kv_heads, max_len, config.head_dim)
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)
        self.slots = slots
        self.max_len = max_len


@dataclass
class _Layer:
    norm1: tuple[torch.Tensor, torch.Tensor | None]
    qkv: tuple[torch.Tensor, torch.Tensor | None]
    out: tuple[torch.Tensor, torch.Tensor | None]
    norm2: tuple[torch.Tensor, torch.Tensor | None]
    up: tuple[torch.Tensor, torch.Tensor | None]  # Llama: gate and up fused
    down: tuple[torch.Tensor, torch.Tensor | None]


class Decoder:
    def __init__(self, config: DecoderConfig, weights: Mapping[str, torch.Tensor]) -> None:
        self.config = config
        self._weights = {name: tensor.float() for name, tensor in weights.items()}
        loader = {"llama": self._load_llama, "gpt2": self._load_gpt2, "opt": self._load_opt}[config.family]
        self.layers: list[_Layer] = []
        self.project_in: torch.Tensor | None = None
        self.project_out: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None
        self.final_norm: tuple[torch.Tensor, torch.Tensor | None] | None = None
        loader()
        del self._weights
        if config.family == "llama":
            half = config.head_dim // 2
            inv_freq = 1.0 / (
                config.rope_theta ** (torch.arange(0, half * 2, 2, dtype=torch.int64).float() / (half * 2))
            )
            freqs = torch.arange(config.max_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            self._cos, self._sin = emb.cos(), emb.sin()

    # --- weights -------------------------------------------------------------------------------------------------

    def _take(self, name: str) -> torch.Tensor:
        try:
            return self._weights[name]
        except KeyError:
            raise UnsupportedModel(f"the weights have no {name!r} (a {self.config.model_type} checkpoint?)") from None

    def _maybe(self, name: str) -> torch.Tensor | None:
        return self._weights.get(name)

    def _head(self, embeddings_name: str, head_name: str) -> None:
        self.embed = self._take(embeddings_name)
        head = self._maybe(head_name)
        self.lm_head = self.embed if (head is None or self.config.tie_embeddings) else head

    def _load_llama(self) -> None:
        c = self.config
        self._head("model.embed_tokens.weight", "lm_head.weight")
        for i in range(c.layers):
            p = f"model.layers.{i}."
            a = p + "self_attn."
            qkv = torch.cat([self._take(a + f"{n}_proj.weight") for n in "qkv"])
            qkv_bias = torch.cat([self._take(a + f"{n}_proj.bias") for n in "qkv"]) if c.qkv_bias else None
            gate_up = torch.cat([self._take(p + "mlp.gate_proj.weight"), self._take(p + "mlp.up_proj.weight")])
            gate_up_bias = None
            if c.mlp_bias:
                gate_up_bias = torch.cat([self._take(p + "mlp.gate_proj.bias"), self._take(p + "mlp.up_proj.bias")])
            self.layers.append(
                _Layer(
                    (self._take(p + "input_layernorm.weight"), None),
                    (qkv, qkv_bias),
                    (self._take(a + "o_proj.weight"), self._maybe(a + "o_proj.bias") if c.out_bias else None),
                    (self._take(p + "post_attention_layernorm.weight"), None),
                    (gate_up, gate_up_bias),
                    (self._take(p + "mlp.down_proj.weight"), self._maybe(p + "mlp.down_proj.bias")),
                )
            )
        self.final_norm = (self._take("model.norm.weight"), None)

    def _load_gpt2(self) -> None:
        prefix = "transformer." if "transformer.wte.weight" in self._weights else ""
        self._head(prefix + "wte.weight", "lm_head.weight")
        self.positions = self._take(prefix + "wpe.weight")
        for i in range(self.config.layers):
            p = f"{prefix}h.{i}."
            pair = self._conv1d
            self.layers.append(
                _Layer(
                    (self._take(p + "ln_1.weight"), self._take(p + "ln_1.bias")),
                    pair(p + "attn.c_attn"),
                    pair(p + "attn.c_proj"),
                    (self._take(p + "ln_2.weight"), self._take(p + "ln_2.bias")),
                    pair(p + "mlp.c_fc"),
                    pair(p + "mlp.c_proj"),
                )
            )
        self.final_norm = (self._take(prefix + "ln_f.weight"), self._take(prefix + "ln_f.bias"))

    def _conv1d(self, name: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """GPT-2's Conv1D keeps its weight as [in, out]: transposed for F.linear."""
        return self._take(name + ".weight").t().contiguous(), self._take(name + ".bias")

    def _load_opt(self) -> None:
        d = "model.decoder."
        self._head(d + "embed_tokens.weight", "lm_head.weight")
        self.positions = self._take(d + "embed_positions.weight")[2:]  # OPT offsets positions by 2
        self.project_in = self._maybe(d + "project_in.weight")
        self.project_out = self._maybe(d + "project_out.weight")
        for i in range(self.config.layers):
            p = f"{d}layers.{i}."
            a = p + "self_attn."
            qkv = torch.cat([self._take(a + f"{n}_proj.weight") for n in "qkv"])
            qkv_bias = torch.cat([self._take(a + f"{n}_proj.bias") for n in "qkv"]) if self.config.qkv_bias else None
            self.layers.append(
                _Layer(
                    (self._take(p + "self_attn_layer_norm.weight"), self._take(p + "self_attn_layer_norm.bias")),
                    (qkv, qkv_bias),
                    (self._take(a + "out_proj.weight"), self._maybe(a + "out_proj.bias")),
                    (self._take(p + "final_layer_norm.weight"), self._take(p + "final_layer_norm.bias")),
                    (self._take(p + "fc1.weight"), self._maybe(p + "fc1.bias")),
                    (self._take(p + "fc2.weight"), self._maybe(p + "fc2.bias")),
                )
            )
        if d + "final_layer_norm.weight" in self._weights:
            self.final_norm = (self._take(d + "final_layer_norm.weight"), self._take(d + "final_layer_norm.bias"))

    # --- forward -------------------------------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, norm: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
        weight, bias = norm
        if self.config.family == "llama":
            variance = x.pow(2).mean(-1, keepdim=True)
            return weight * (x * torch.rsqrt(variance + self.config.norm_eps))
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.config.norm_eps)

    def _rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x: [tokens, heads, head_dim]; transformers' rotate_half convention."""
        cos, sin = self._cos[positions][:, None, :], self._sin[positions][:, None, :]
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    @torch.inference_mode()
    def forward(
        self, tokens: torch.Tensor, segments: Sequence[Segment], cache: KVCache, logits_rows: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits [len(segments), vocab] of each segment's last token (or of `logits_rows`, indices into `tokens`).
        `tokens` [N] int64 are the segments' tokens in order; their keys and values are written to the cache."""
        c = self.config
        positions = torch.cat([torch.arange(s.start, s.start + s.length) for s in segments])
        if int(positions.max()) >= min(cache.max_len, c.max_positions):
            raise ValueError(f"position {int(positions.max())} is past the context ({c.max_positions} tokens)")
        slots = torch.cat([torch.full((s.length,), s.slot, dtype=torch.int64) for s in segments])
        x = self.embed[tokens]
        if self.project_in is not None:
            x = F.linear(x, self.project_in)
        if self.positions is not None:
            x = x + self.positions[positions]
        singles = [i for i, s in enumerate(segments) if s.length == 1]
        offsets = torch.tensor([0, *[s.length for s in segments]]).cumsum(0)
        for index, layer in enumerate(self.layers):
            residual = x
            h = self._norm(x, layer.norm1) if c.norm_before else x
            h = self._attention(index, layer, h, positions, slots, segments, singles, offsets, cache)
            x = residual + h
            if not c.norm_before:
                x = self._norm(x, layer.norm1)
            residual = x
            h = self._norm(x, layer.norm2) if c.norm_before else x
            x = residual + self._mlp(layer, h)
            if not c.norm_before:
                x = self._norm(x, layer.norm2)
        rows = offsets[1:] - 1 if logits_rows is None else logits_rows
        x = x[rows]
        if self.final_norm is not None:
            x = self._norm(x, self.final_norm)
        if self.project_out is not None:
            x = F.linear(x, self.project_out)
        return F.linear(x, self.lm_head)

    def _mlp(self, layer: _Layer, h: torch.Tensor) -> torch.Tensor:
        up = F.linear(h, *layer.up)
        if self.config.family == "llama":
            gate, up = up.chunk(2, dim=-1)
            up = F.silu(gate) * up
        elif self.config.activation == "relu":
            up = F.relu(up)
        else:
            up = F.gelu(up, approximate="tanh")
        return F.linear(up, *layer.down)

    def _attention(
        self,
        index: int,
        layer: _Layer,
        h: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        segments: Sequence[Segment],
        singles: Sequence[int],
        offsets: torch.Tensor,
        cache: KVCache,
    ) -> torch.Tensor:
        c = self.config
        n = h.shape[0]
        qkv = F.linear(h, *layer.qkv)
        q = qkv[:, : c.heads * c.head_dim].view(n, c.heads, c.head_dim)
        k = qkv[:, c.heads * c.head_dim : (c.heads + c.kv_heads) * c.head_dim].view(n, c.kv_heads, c.head_dim)
        v = qkv[:, (c.heads + c.kv_heads) * c.head_dim :].view(n, c.kv_heads, c.head_dim)
        if c.family == "llama":
            q, k = self._rope(q, positions), self._rope(k, positions)
        keys, values = cache.keys[index], cache.values[index]  # [slots, kv_heads, max_len, head_dim]
        keys[slots, :, positions] = k
        values[slots, :, positions] = v
        out = torch.empty(n, c.heads, c.head_dim)
        gqa = c.kv_heads != c.heads
        if singles:
            out[offsets[torch.tensor(singles)]] = self._decode_attention(q, keys, values, segments, singles, offsets)
        for i, segment in enumerate(segments):
            if segment.length == 1:
                continue
            begin, end = int(offsets[i]), int(offsets[i + 1])
            total = segment.start + segment.length
            query = q[begin:end].transpose(0, 1)[None]  # [1, heads, length, head_dim]
            key = keys[segment.slot, :, :total][None]
            value = values[segment.slot, :, :total][None]
            if segment.start == 0:  # the whole prompt at once: the causal kernel needs no mask
                attended = F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=gqa)
            else:
                allowed = torch.arange(total)[None, :] <= torch.arange(segment.start, total)[:, None]
                attended = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, enable_gqa=gqa)
            out[begin:end] = attended[0].transpose(0, 1)
        return F.linear(out.reshape(n, c.heads * c.head_dim), *layer.out)

    def _decode_attention(
        self,
        q: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        segments: Sequence[Segment],
        singles: Sequence[int],
        offsets: torch.Tensor,
    ) -> torch.Tensor:
        """One query token per sequence against its slot's cache, for every one-token segment at once: matmuls over
        the cache's slots up to the highest in use and positions up to the longest (views, no copy), each slot
        masked to its own length. Grouped-query heads share their key/value head by a reshape, not a copy. (SDPA's
        CPU kernel with a mask measured 4.5 ms a call here for 16 slots of 100 tokens; these matmuls a fraction.)"""
        c = self.config
        group = c.heads // c.kv_heads
        slots = [segments[i].slot for i in singles]
        lengths = [segments[i].start + 1 for i in singles]
        top, longest = max(slots) + 1, max(lengths)
        query = q.new_zeros(top, c.kv_heads, group, c.head_dim)
        index = torch.tensor(slots)
        query[index] = q[offsets[torch.tensor(singles)]].view(len(singles), c.kv_heads, group, c.head_dim)
        scores = torch.matmul(query, keys[:top, :, :longest].transpose(-1, -2)) * (c.head_dim**-0.5)
        visible = torch.zeros(top, longest, dtype=torch.bool)
        for slot, length in zip(slots, lengths, strict=True):
            visible[slot, :length] = True
        scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num_(0.0)  # idle slots' rows are all masked
        attended = torch.matmul(weights, values[:top, :, :longest])  # [top, kv_heads, group, head_dim]
        return attended[index].reshape(len(singles), c.heads, c.head_dim)
