"""A decoder's weights from a transformers state dict, in one layout for every family, and its RoPE tables.

The names and layouts are transformers' own (see neuron_emu.llm.config for the families): Llama/Mistral/Qwen2
keep query, key, value, gate and up as separate [out, in] matrices; GPT-2 fuses query/key/value into one Conv1D
kept [in, out] (transposed here, then split); OPT offsets its learned positions by 2 and may project the
embeddings in and out (word_embed_proj_dim). Every tensor is held in float32 (what the graphs compute in; auto-cast
rounds matmul operands at run time); `dtype` remembers the checkpoint's floating dtype, the KV cache's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.errors import DecoderCompileError

Tensor = torch.Tensor
Pair = tuple[Tensor, Tensor | None]
CACHE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class LayerWeights:
    norm1: Pair  # before attention (after it, for OPT-350m)
    q: Pair
    k: Pair
    v: Pair
    o: Pair
    norm2: Pair  # before the MLP (after it, for OPT-350m)
    gate: Pair | None  # Llama's SiLU gate
    up: Pair
    down: Pair


@dataclass(frozen=True)
class ModelWeights:
    embed: Tensor
    lm_head: Tensor
    layers: tuple[LayerWeights, ...]
    dtype: torch.dtype = torch.float32  # the checkpoint's (the KV cache's); the tensors here are all float32
    positions: Tensor | None = None  # learned positions (GPT-2, OPT without its offset of 2)
    project_in: Tensor | None = None
    project_out: Tensor | None = None
    final_norm: Pair | None = None


class _Reader:
    def __init__(self, config: DecoderConfig, weights: Mapping[str, Tensor]) -> None:
        self.config = config
        self.weights = weights

    def take(self, name: str, shape: tuple[int, ...]) -> Tensor:
        tensor = self.weights.get(name)
        if tensor is None:
            raise DecoderCompileError(f"the weights have no {name!r} (a {self.config.model_type} checkpoint?)")
        if not isinstance(tensor, Tensor) or not tensor.is_floating_point():
            raise DecoderCompileError(f"weight {name!r} is not a floating-point tensor")
        if tuple(tensor.shape) != shape:
            raise DecoderCompileError(
                f"weight {name!r} has shape {list(tensor.shape)}; the config implies {list(shape)}"
            )
        return tensor.detach().to(torch.float32).contiguous()

    def maybe(self, name: str, shape: tuple[int, ...]) -> Tensor | None:
        return self.take(name, shape) if name in self.weights else None

    def linear(self, name: str, out: int, inp: int, bias: bool | None) -> Pair:
        """A [out, in] weight and its bias: required (True), absent (False), or taken if present (None)."""
        weight = self.take(name + ".weight", (out, inp))
        if bias is None:
            return weight, self.maybe(name + ".bias", (out,))
        return weight, self.take(name + ".bias", (out,)) if bias else None

    def norm(self, name: str, width: int, bias: bool) -> Pair:
        return self.take(name + ".weight", (width,)), self.take(name + ".bias", (width,)) if bias else None

    def conv1d(self, name: str, inputs: int, outputs: int) -> Pair:
        """GPT-2's Conv1D keeps its weight as [in, out]: transposed to [out, in]."""
        return self.take(name + ".weight", (inputs, outputs)).t().contiguous(), self.take(name + ".bias", (outputs,))

    def head(self, embed: Tensor, name: str, width: int) -> Tensor:
        head = self.maybe(name, (self.config.vocab_size, width))
        return embed if head is None or self.config.tie_embeddings else head


def _split3(pair: Pair, width: int) -> tuple[Pair, Pair, Pair]:
    weight, bias = pair
    ws = weight.split(width)
    bs: tuple[Tensor | None, ...] = bias.split(width) if bias is not None else (None, None, None)
    return (ws[0], bs[0]), (ws[1], bs[1]), (ws[2], bs[2])


def _llama_layer(r: _Reader, p: str) -> LayerWeights:
    c = r.config
    hidden, q_width, kv_width, inner = c.hidden_size, c.heads * c.head_dim, c.kv_heads * c.head_dim, c.intermediate_size
    a, m = p + "self_attn.", p + "mlp."
    return LayerWeights(
        norm1=r.norm(p + "input_layernorm", hidden, False),
        q=r.linear(a + "q_proj", q_width, hidden, c.qkv_bias),
        k=r.linear(a + "k_proj", kv_width, hidden, c.qkv_bias),
        v=r.linear(a + "v_proj", kv_width, hidden, c.qkv_bias),
        o=r.linear(a + "o_proj", hidden, q_width, None if c.out_bias else False),
        norm2=r.norm(p + "post_attention_layernorm", hidden, False),
        gate=r.linear(m + "gate_proj", inner, hidden, c.mlp_bias),
        up=r.linear(m + "up_proj", inner, hidden, c.mlp_bias),
        down=r.linear(m + "down_proj", hidden, inner, None),
    )


def _llama(r: _Reader) -> ModelWeights:
    c = r.config
    embed = r.take("model.embed_tokens.weight", (c.vocab_size, c.hidden_size))
    layers = tuple(_llama_layer(r, f"model.layers.{i}.") for i in range(c.layers))
    return ModelWeights(
        embed, r.head(embed, "lm_head.weight", c.hidden_size), layers,
        final_norm=r.norm("model.norm", c.hidden_size, False),
    )  # fmt: skip


def _gpt2_layer(r: _Reader, p: str) -> LayerWeights:
    hidden, inner = r.config.hidden_size, r.config.intermediate_size
    q, k, v = _split3(r.conv1d(p + "attn.c_attn", hidden, 3 * hidden), hidden)
    return LayerWeights(
        norm1=r.norm(p + "ln_1", hidden, True), q=q, k=k, v=v, o=r.conv1d(p + "attn.c_proj", hidden, hidden),
        norm2=r.norm(p + "ln_2", hidden, True), gate=None, up=r.conv1d(p + "mlp.c_fc", hidden, inner),
        down=r.conv1d(p + "mlp.c_proj", inner, hidden),
    )  # fmt: skip


def _gpt2(r: _Reader) -> ModelWeights:
    c = r.config
    prefix = "transformer." if "transformer.wte.weight" in r.weights else ""
    embed = r.take(prefix + "wte.weight", (c.vocab_size, c.hidden_size))
    layers = tuple(_gpt2_layer(r, f"{prefix}h.{i}.") for i in range(c.layers))
    return ModelWeights(
        embed, r.head(embed, "lm_head.weight", c.hidden_size), layers,
        positions=r.take(prefix + "wpe.weight", (c.max_positions, c.hidden_size)),
        final_norm=r.norm(prefix + "ln_f", c.hidden_size, True),
    )  # fmt: skip


def _opt_layer(r: _Reader, p: str) -> LayerWeights:
    c = r.config
    hidden, inner = c.hidden_size, c.intermediate_size
    a = p + "self_attn."
    return LayerWeights(
        norm1=r.norm(p + "self_attn_layer_norm", hidden, True),
        q=r.linear(a + "q_proj", hidden, hidden, c.qkv_bias),
        k=r.linear(a + "k_proj", hidden, hidden, c.qkv_bias),
        v=r.linear(a + "v_proj", hidden, hidden, c.qkv_bias),
        o=r.linear(a + "out_proj", hidden, hidden, None),
        norm2=r.norm(p + "final_layer_norm", hidden, True),
        gate=None,
        up=r.linear(p + "fc1", inner, hidden, None),
        down=r.linear(p + "fc2", hidden, inner, None),
    )


def _opt(r: _Reader) -> ModelWeights:
    c = r.config
    hidden = c.hidden_size
    width = c.embed_dim or hidden
    d = "model.decoder."
    embed = r.take(d + "embed_tokens.weight", (c.vocab_size, width))
    layers = tuple(_opt_layer(r, f"{d}layers.{i}.") for i in range(c.layers))
    positions = r.take(d + "embed_positions.weight", (c.max_positions + 2, hidden))[2:].contiguous()
    final = r.norm(d + "final_layer_norm", hidden, True) if d + "final_layer_norm.weight" in r.weights else None
    return ModelWeights(
        embed, r.head(embed, "lm_head.weight", width), layers, positions=positions,
        project_in=r.maybe(d + "project_in.weight", (hidden, width)) if width != hidden else None,
        project_out=r.maybe(d + "project_out.weight", (width, hidden)) if width != hidden else None,
        final_norm=final,
    )  # fmt: skip


def read_weights(config: DecoderConfig, weights: Mapping[str, Tensor]) -> ModelWeights:
    """The model's weights, checked against the shapes its config implies; DecoderCompileError names what is off."""
    if not isinstance(weights, Mapping):
        raise DecoderCompileError(f"weights must be a mapping of names to tensors, got {type(weights).__name__}")
    reader = _Reader(config, weights)
    model = {"llama": _llama, "gpt2": _gpt2, "opt": _opt}[config.family](reader)
    dtype = next(t.dtype for t in weights.values() if isinstance(t, Tensor) and t.is_floating_point())
    if dtype not in CACHE_DTYPES:
        raise DecoderCompileError(f"weights in {dtype} are not supported (float32, bfloat16 or float16)")
    return replace(model, dtype=dtype)


def rope_tables(config: DecoderConfig, length: int) -> tuple[Tensor, Tensor]:
    """cos and sin [length, head_dim] of the default RoPE, in transformers' rotate_half layout, in float32."""
    half = config.head_dim // 2
    exponents = torch.arange(0, half * 2, 2, dtype=torch.int64).float() / (half * 2)
    inv_freq = 1.0 / (config.rope_theta**exponents)
    freqs = torch.arange(length, dtype=torch.float32)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().contiguous(), emb.sin().contiguous()
