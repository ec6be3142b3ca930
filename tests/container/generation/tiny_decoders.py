"""Tiny random-weight causal LMs of every family the engine runs, built by transformers itself (seeded)."""

from __future__ import annotations

from typing import Any

import torch

VOCAB = 96


def tiny_decoder(kind: str, seed: int = 0, context: int = 256) -> Any:
    """A transformers *ForCausalLM in eval mode: llama (GQA), qwen2 (qkv biases), gpt2, opt, opt-proj (OPT with
    project_in/out) and opt-post (OPT-350m's LayerNorm after each block). `context` sets llama/qwen2's positions
    (RoPE: no weights grow with it)."""
    import transformers as t

    torch.manual_seed(seed)
    model: Any
    config: Any
    common: dict[str, Any] = {"vocab_size": VOCAB, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    if kind in ("llama", "qwen2"):
        config_class = t.LlamaConfig if kind == "llama" else t.Qwen2Config
        model_class = t.LlamaForCausalLM if kind == "llama" else t.Qwen2ForCausalLM
        config = config_class(
            hidden_size=48, intermediate_size=96, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
            max_position_embeddings=context, tie_word_embeddings=kind == "qwen2", **common,
        )  # fmt: skip
        model = model_class(config)
    elif kind == "gpt2":
        model = t.GPT2LMHeadModel(t.GPT2Config(n_embd=48, n_layer=3, n_head=4, n_positions=256, **common))
    else:
        extra: dict[str, Any] = {"word_embed_proj_dim": 32} if kind == "opt-proj" else {}
        if kind == "opt-post":
            extra["do_layer_norm_before"] = False
        config = t.OPTConfig(
            hidden_size=48, ffn_dim=96, num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=256,
            **extra, **common,
        )  # fmt: skip
        model = t.OPTForCausalLM(config)
    with torch.no_grad():  # random init leaves some weights at 0 or 1: make every weight count
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model.eval()


def engine_inputs(model: Any) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config.json as a dict, the state dict): what a Sagebox artifact carries."""
    return model.config.to_dict(), dict(model.state_dict())
