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
projections. Linear layers are FP32 or INT8 (container/generation/linear.py); an INT8 artifact's weights arrive as
int8 with per-channel scales (container/generation/quantized.py) and are packed for the INT8 kernels here.

Per-step Python work is kept out of the per-layer loop (measured on the demo model, 30 layers: each torch call costs
a few microseconds, ~50 calls a layer were ~6 ms of a ~12 ms INT8 step): the rotary tables, the decode attention's
mask and index tensors are built once per step, query and key are rotated together, RMSNorm is one call, and a lone
decoding sequence attends through one SDPA call without a mask.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from container.generation.linear import Linear, make_linear
from container.generation.quantized import dequantize
from container.generation.scripted import script_layers
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
        # Each slot's per-layer [kv_heads, max_len, head_dim] views, and each layer's, made once for the scripted
        # layers (scripted.py): a lone decoding sequence reaches its slot without two indexing calls per layer and step.
        self.slot_keys = [list(self.keys[:, slot].unbind(0)) for slot in range(slots)]
        self.slot_values = [list(self.values[:, slot].unbind(0)) for slot in range(slots)]
        self.layer_keys, self.layer_values = list(self.keys.unbind(0)), list(self.values.unbind(0))


@dataclass
class _Layer:
    norm1: tuple[torch.Tensor, torch.Tensor | None]
    qkv: Linear
    out: Linear
    norm2: tuple[torch.Tensor, torch.Tensor | None]
    up: Linear  # Llama: gate and up fused
    down: Linear


@dataclass(frozen=True)
class _Step:
    """What every layer of one step shares: positions, cache slots, rotary tables, decode attention's mask."""

    positions: torch.Tensor
    slots: torch.Tensor
    # [tokens, head_dim, head_dim]: RoPE at each token's position as a matrix (x @ rotation), Llama only.
    rotation: torch.Tensor | None
    singles: list[int]  # indices of the one-token segments
    single_rows: torch.Tensor | None  # their rows among the step's tokens
    all_single: bool
    lone: tuple[int, int] | None = None  # (slot, position) when the step is one sequence decoding one token
    top: int = 0  # slots 0..top-1 take part in the decode matmuls
    longest: int = 0
    query_slots: torch.Tensor | None = None  # the singles' slots
    mask: torch.Tensor | None = None  # [top, 1, 1, longest] additive: 0 where visible, -inf elsewhere


class Decoder:
    def __init__(self, config: DecoderConfig, weights: Mapping[str, torch.Tensor], linear: str = "fp32") -> None:
        """`linear`: "fp32", or "int8" (INT8 kernels; the weights may be FP32 or an INT8 artifact's)."""
        self.config = config
        self.linear = linear
        self._weights = {name: tensor.float() for name, tensor in dequantize(weights).items()}
        loader = {"llama": self._load_llama, "gpt2": self._load_gpt2, "opt": self._load_opt}[config.family]
        self.layers: list[_Layer] = []
        self.project_in: Linear | None = None
        self.project_out: Linear | None = None
        self.positions: torch.Tensor | None = None
        self.final_norm: tuple[torch.Tensor, torch.Tensor | None] | None = None
        loader()
        self.lm_head = self._linear((self._lm_head, None))
        del self._weights, self._lm_head
        self._scripted = script_layers(self)
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
        self._lm_head = self.embed if (head is None or self.config.tie_embeddings) else head

    def _linear(self, pair: tuple[torch.Tensor, torch.Tensor | None]) -> Linear:
        return make_linear(pair[0], pair[1], self.linear)

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
                    self._linear((qkv, qkv_bias)),
                    self._linear(
                        (self._take(a + "o_proj.weight"), self._maybe(a + "o_proj.bias") if c.out_bias else None)
                    ),
                    (self._take(p + "post_attention_layernorm.weight"), None),
                    self._linear((gate_up, gate_up_bias)),
                    self._linear((self._take(p + "mlp.down_proj.weight"), self._maybe(p + "mlp.down_proj.bias"))),
                )
            )
        self.final_norm = (self._take("model.norm.weight"), None)

    def _load_gpt2(self) -> None:
        prefix = "transformer." if "transformer.wte.weight" in self._weights else ""
        self._head(prefix + "wte.weight", "lm_head.weight")
        self.positions = self._take(prefix + "wpe.weight")
        for i in range(self.config.layers):
            p = f"{prefix}h.{i}."
            pair = self._conv1d_linear
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

    def _conv1d_linear(self, name: str) -> Linear:
        """GPT-2's Conv1D keeps its weight as [in, out]: transposed for F.linear."""
        return self._linear((self._take(name + ".weight").t().contiguous(), self._take(name + ".bias")))

    def _load_opt(self) -> None:
        d = "model.decoder."
        self._head(d + "embed_tokens.weight", "lm_head.weight")
        self.positions = self._take(d + "embed_positions.weight")[2:]  # OPT offsets positions by 2
        project_in, project_out = self._maybe(d + "project_in.weight"), self._maybe(d + "project_out.weight")
        self.project_in = None if project_in is None else self._linear((project_in, None))
        self.project_out = None if project_out is None else self._linear((project_out, None))
        for i in range(self.config.layers):
            p = f"{d}layers.{i}."
            a = p + "self_attn."
            qkv = torch.cat([self._take(a + f"{n}_proj.weight") for n in "qkv"])
            qkv_bias = torch.cat([self._take(a + f"{n}_proj.bias") for n in "qkv"]) if self.config.qkv_bias else None
            self.layers.append(
                _Layer(
                    (self._take(p + "self_attn_layer_norm.weight"), self._take(p + "self_attn_layer_norm.bias")),
                    self._linear((qkv, qkv_bias)),
                    self._linear((self._take(a + "out_proj.weight"), self._maybe(a + "out_proj.bias"))),
                    (self._take(p + "final_layer_norm.weight"), self._take(p + "final_layer_norm.bias")),
                    self._linear((self._take(p + "fc1.weight"), self._maybe(p + "fc1.bias"))),
                    self._linear((self._take(p + "fc2.weight"), self._maybe(p + "fc2.bias"))),
                )
            )
        if d + "final_layer_norm.weight" in self._weights:
            self.final_norm = (self._take(d + "final_layer_norm.weight"), self._take(d + "final_layer_norm.bias"))

    # --- forward -------------------------------------------------------------------------------------------------

    def _norm(self, x: torch.Tensor, norm: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
        weight, bias = norm
        if self.config.family == "llama":
            return F.rms_norm(x, (x.shape[-1],), weight, self.config.norm_eps)
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.config.norm_eps)

    def _plan(self, segments: Sequence[Segment], positions: torch.Tensor, slots: torch.Tensor) -> _Step:
        rotation = None
        if self.config.family == "llama":
            rotation = self._rotation(positions)
        singles = [i for i, s in enumerate(segments) if s.length == 1]
        all_single = len(singles) == len(segments)
        if not singles:
            return _Step(positions, slots, rotation, singles, None, all_single)
        rows = torch.tensor([0, *[s.length for s in segments]]).cumsum(0)[torch.tensor(singles)]
        if len(singles) == 1:
            lone = (segments[0].slot, segments[0].start) if all_single else None
            return _Step(positions, slots, rotation, singles, rows, all_single, lone)
        query_slots = [segments[i].slot for i in singles]
        lengths = [segments[i].start + 1 for i in singles]
        top, longest = max(query_slots) + 1, max(lengths)
        # Slots not decoding this step see position 0 only (their rows are dropped): no row is all -inf, so
        # softmax needs no NaN clean-up.
        visible = torch.zeros(top, longest, dtype=torch.bool)
        visible[:, 0] = True
        for slot, length in zip(query_slots, lengths, strict=True):
            visible[slot, :length] = True
        mask = torch.zeros(top, 1, 1, longest).masked_fill_(~visible[:, None, None, :], float("-inf"))
        return _Step(
            positions,
            slots,
            rotation,
            singles,
            rows,
            all_single,
            top=top,
            longest=longest,
            query_slots=torch.tensor(query_slots),
            mask=mask,
        )

    def _rotation(self, positions: torch.Tensor) -> torch.Tensor:
        """RoPE (transformers' rotate_half convention: x*cos + rotate_half(x)*sin, rotate_half(x) = [-x2, x1]) as
        one matrix per position, [tokens, head_dim, head_dim], for row vectors: rotating query and key heads is one
        batched matmul a layer where the elementwise form took nine calls (~0.7 ms a step over 30 layers). Each
        output element still sums the same two products (the others are exact zeros)."""
        half = self.config.head_dim // 2
        cos, sin = self._cos[positions], self._sin[positions]  # [tokens, head_dim]
        rotation = torch.diag_embed(cos)
        index = torch.arange(half)
        # out[j] = x[j]*cos[j] - x[j+half]*sin[j] (j < half); out[j+half] = x[j+half]*cos[j+half] + x[j]*sin[j+half]
        rotation[:, index + half, index] = -sin[:, :half]
        rotation[:, index, index + half] = sin[:, half:]
        return rotation

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
        step = self._plan(segments, positions, slots)
        offsets = torch.tensor([0, *[s.length for s in segments]]).cumsum(0)
        x = self.embed[tokens]
        if self.project_in is not None:
            x = self.project_in(x)
        if self.positions is not None:
            x = x + self.positions[positions]
        if self._scripted is not None and step.all_single and logits_rows is None:
            if step.lone is not None:
                slot, position = step.lone
                x = self._scripted(x, step.rotation, cache.slot_keys[slot], cache.slot_values[slot], position)
            else:
                assert step.mask is not None
                x = self._scripted.batch(
                    x,
                    step.rotation,
                    cache.layer_keys,
                    cache.layer_values,
                    step.slots,
                    step.positions,
                    step.mask,
                    step.top,
                    step.longest,
                )
            return self.lm_head(self._norm(x, self.final_norm) if self.final_norm is not None else x)
        for index, layer in enumerate(self.layers):
            residual = x
            h = self._norm(x, layer.norm1) if c.norm_before else x
            h = self._attention(index, layer, h, step, segments, offsets, cache)
            x = residual + h
            if not c.norm_before:
                x = self._norm(x, layer.norm1)
            residual = x
            h = self._norm(x, layer.norm2) if c.norm_before else x
            x = residual + self._mlp(layer, h)
            if not c.norm_before:
                x = self._norm(x, layer.norm2)
        rows = offsets[1:] - 1 if logits_rows is None else logits_rows
        if not (step.all_single and logits_rows is None):
            x = x[rows]
        if self.final_norm is not None:
            x = self._norm(x, self.final_norm)
        if self.project_out is not None:
            x = self.project_out(x)
        return self.lm_head(x)

    def _mlp(self, layer: _Layer, h: torch.Tensor) -> torch.Tensor:
        up = layer.up(h)
        if self.config.family == "llama":
            gate, up = up.chunk(2, dim=-1)
            up = F.silu(gate).mul_(up)
        elif self.config.activation == "relu":
            up = F.relu(up)
        else:
            up = F.gelu(up, approximate="tanh")
        return layer.down(up)

    def _attention(
        self,
        index: int,
        layer: _Layer,
        h: torch.Tensor,
        step: _Step,
        segments: Sequence[Segment],
        offsets: torch.Tensor,
        cache: KVCache,
    ) -> torch.Tensor:
        c = self.config
        n = h.shape[0]
        qkv = layer.qkv(h)
        q_width, kv_width = c.heads * c.head_dim, c.kv_heads * c.head_dim
        v = qkv[:, q_width + kv_width :].view(n, c.kv_heads, c.head_dim)
        if step.rotation is not None:
            # Query and key heads rotated together: one batched matmul by each token's rotation matrix.
            qk = torch.matmul(qkv[:, : q_width + kv_width].view(n, c.heads + c.kv_heads, c.head_dim), step.rotation)
            q, k = qk[:, : c.heads], qk[:, c.heads :]
        else:
            q = qkv[:, :q_width].view(n, c.heads, c.head_dim)
            k = qkv[:, q_width : q_width + kv_width].view(n, c.kv_heads, c.head_dim)
        keys, values = cache.keys[index], cache.values[index]  # [slots, kv_heads, max_len, head_dim]
        gqa = c.kv_heads != c.heads
        keys[step.slots, :, step.positions] = k
        values[step.slots, :, step.positions] = v
        if step.all_single:
            out = self._decode_attention(q, keys, values, step, segments)
            return layer.out(out.reshape(n, q_width))
        out = torch.empty(n, c.heads, c.head_dim)
        if step.singles:
            out[step.single_rows] = self._decode_attention(q, keys, values, step, segments)
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
        return layer.out(out.reshape(n, q_width))

    def _decode_attention(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, step: _Step, segments: Sequence[Segment]
    ) -> torch.Tensor:
        """One query token per sequence against its slot's cache, for every one-token segment at once: [singles,
        heads, head_dim]. A lone sequence: one SDPA call over its slot's keys up to its length, no mask. Several:
        matmuls over the cache's slots up to the highest in use and positions up to the longest (views, no copy:
        gathering the batch's slots would copy the cache every step), each slot masked to its own length by the
        step's mask; grouped-query heads share their key/value head by a reshape, not a copy. (SDPA's CPU kernel
        with a mask measured 4.5 ms a call here for 16 slots of 100 tokens; these matmuls a fraction.)"""
        c = self.config
        assert step.single_rows is not None
        if len(step.singles) == 1:
            segment = segments[step.singles[0]]
            total = segment.start + 1
            query = q[step.single_rows].transpose(0, 1)[None]  # [1, heads, 1, head_dim]
            attended = F.scaled_dot_product_attention(
                query,
                keys[segment.slot, :, :total][None],
                values[segment.slot, :, :total][None],
                enable_gqa=c.kv_heads != c.heads,
            )
            return attended[0].transpose(0, 1)
        assert step.query_slots is not None and step.mask is not None
        group = c.heads // c.kv_heads
        count = len(step.singles)
        query = q.new_zeros(step.top, c.kv_heads, group, c.head_dim)
        query[step.query_slots] = q[step.single_rows].view(count, c.kv_heads, group, c.head_dim) * (c.head_dim**-0.5)
        scores = torch.matmul(query, keys[: step.top, :, : step.longest].transpose(-1, -2)).add_(step.mask)
        weights = torch.softmax(scores, dim=-1)
        attended = torch.matmul(weights, values[: step.top, :, : step.longest])  # [top, kv_heads, group, head_dim]
        return attended[step.query_slots].reshape(count, c.heads, c.head_dim)
