"""A decoder LLM's shape, read from its Hugging Face config.json (a plain dict: the serving image has no transformers).

One reading for every user of the shape: the serving image's CPU engine (container/generation), the NeuronCore
compilation and cost model (neuron_emu.llm) and the planner (`sagebox plan`, from a config alone).

Three families, each the layout of transformers' own modeling code for it:
- llama: Llama, Mistral, Qwen2, SmolLM2, TinyLlama (RoPE, RMSNorm, grouped-query attention, a SiLU-gated MLP;
  Qwen2 has biases on query/key/value); rope types other than the default are refused by name;
- gpt2: learned positions, LayerNorm before each block, fused query/key/value (Conv1D weights), GELU (tanh);
- opt: learned positions offset by 2, LayerNorm before (or, for OPT-350m, after) each block, ReLU, and the
  project_in/out pair where word_embed_proj_dim differs from hidden_size.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from neuron_emu.errors import NeuronEmuError

LLAMA_TYPES = ("llama", "mistral", "qwen2")
FAMILIES = {**{name: "llama" for name in LLAMA_TYPES}, "gpt2": "gpt2", "opt": "opt"}


class UnsupportedModel(NeuronEmuError, ValueError):
    """A config.json this engine cannot run, with the reason."""


@dataclass(frozen=True)
class DecoderConfig:
    family: str  # "llama", "gpt2" or "opt"
    model_type: str
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    max_positions: int
    norm_eps: float
    tie_embeddings: bool
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    rope_theta: float = 10000.0
    activation: str = "silu"
    norm_before: bool = True  # OPT-350m normalizes after each block
    embed_dim: int = 0  # OPT's word_embed_proj_dim (0: same as hidden_size)
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of key/value cache one token takes over all layers, in float32."""
        return 2 * self.layers * self.kv_heads * self.head_dim * 4


def _ints(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return tuple(int(v) for v in value)


def _rope_theta(raw: Mapping[str, Any]) -> float:
    parameters = raw.get("rope_parameters") or {}
    scaling = raw.get("rope_scaling") or {}
    rope_type = parameters.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise UnsupportedModel(f"rope type {rope_type!r} is not supported yet (only the default RoPE)")
    return float(parameters.get("rope_theta") or raw.get("rope_theta") or 10000.0)


def read_config(raw: Mapping[str, Any]) -> DecoderConfig:
    """The shape of a causal LM from its config.json; UnsupportedModel names what is missing or not handled."""
    model_type = raw.get("model_type")
    if model_type not in FAMILIES:
        supported = ", ".join(sorted(FAMILIES))
        raise UnsupportedModel(f"model_type {model_type!r} is not a supported decoder (supported: {supported})")
    family = FAMILIES[model_type]
    eos = _ints(raw.get("eos_token_id"))
    bos = raw.get("bos_token_id")
    try:
        if family == "gpt2":
            hidden, heads = int(raw["n_embd"]), int(raw["n_head"])
            activation = raw.get("activation_function", "gelu_new")
            if activation not in ("gelu_new", "gelu_pytorch_tanh"):
                raise UnsupportedModel(f"GPT-2 activation {activation!r} is not supported")
            return DecoderConfig(
                family, model_type, int(raw["vocab_size"]), hidden, int(raw["n_layer"]), heads, heads,
                hidden // heads, int(raw.get("n_inner") or 4 * hidden), int(raw["n_positions"]),
                float(raw.get("layer_norm_epsilon", 1e-5)), bool(raw.get("tie_word_embeddings", True)),
                qkv_bias=True, out_bias=True, mlp_bias=True, activation="gelu_tanh", eos_token_ids=eos,
                bos_token_id=bos,
            )  # fmt: skip
        if family == "opt":
            hidden, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
            activation = raw.get("activation_function", "relu")
            if activation != "relu":
                raise UnsupportedModel(f"OPT activation {activation!r} is not supported")
            bias = bool(raw.get("enable_bias", True))
            return DecoderConfig(
                family, model_type, int(raw["vocab_size"]), hidden, int(raw["num_hidden_layers"]), heads, heads,
                hidden // heads, int(raw["ffn_dim"]), int(raw["max_position_embeddings"]), 1e-5,
                bool(raw.get("tie_word_embeddings", True)), qkv_bias=bias, out_bias=bias, mlp_bias=bias,
                activation="relu", norm_before=bool(raw.get("do_layer_norm_before", True)),
                embed_dim=int(raw.get("word_embed_proj_dim") or hidden), eos_token_ids=eos, bos_token_id=bos,
            )  # fmt: skip
        hidden, heads = int(raw["hidden_size"]), int(raw["num_attention_heads"])
        activation = raw.get("hidden_act", "silu")
        if activation != "silu":
            raise UnsupportedModel(f"activation {activation!r} is not supported for {model_type} (only silu)")
        qwen = model_type == "qwen2"
        max_positions = int(raw.get("max_position_embeddings", 2048))
        window = raw.get("sliding_window") if raw.get("use_sliding_window", not qwen) else None
        if window:
            # Full attention equals sliding-window attention while a sequence fits in the window: the context is the
            # window (Mistral-7B-v0.1: 4,096 of 32,768 positions).
            max_positions = min(max_positions, int(window))
        return DecoderConfig(
            family, model_type, int(raw["vocab_size"]), hidden, int(raw["num_hidden_layers"]), heads,
            int(raw.get("num_key_value_heads") or heads), int(raw.get("head_dim") or hidden // heads),
            int(raw["intermediate_size"]), max_positions,
            float(raw.get("rms_norm_eps", 1e-6)), bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=qwen or bool(raw.get("attention_bias", False)), out_bias=bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)), rope_theta=_rope_theta(raw), eos_token_ids=eos,
            bos_token_id=bos,
        )  # fmt: skip
    except KeyError as exc:
        raise UnsupportedModel(f"config.json of a {model_type} model has no {exc.args[0]!r}") from None
