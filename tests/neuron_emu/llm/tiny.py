"""Tiny seeded causal LMs whose heads split 8 ways, and the CPU FP32 engine's greedy tokens to compare against."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from container.generation.decoder import Decoder, KVCache, Segment
from neuron_emu.llm.config import read_config

VOCAB = 96
NEAR_TIE = 1e-3  # top-two logits of the reference this close: either token is a correct greedy choice


def tiny_model(kind: str, seed: int = 0, positions: int = 128) -> Any:
    """A transformers *ForCausalLM in eval mode with hidden 64, 8 attention heads and 2 layers: llama (2 key/value
    heads), qwen2 (query/key/value biases, tied embeddings), gpt2, opt, opt-post (OPT-350m's norms after each block)
    and opt-proj (project_in/out)."""
    import transformers as t

    torch.manual_seed(seed)
    common: dict[str, Any] = {"vocab_size": VOCAB, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    model: Any
    if kind in ("llama", "qwen2"):
        config_class: Any = t.LlamaConfig if kind == "llama" else t.Qwen2Config
        model_class: Any = t.LlamaForCausalLM if kind == "llama" else t.Qwen2ForCausalLM
        model = model_class(
            config_class(
                hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=8,
                num_key_value_heads=2, max_position_embeddings=positions, tie_word_embeddings=kind == "qwen2",
                **common,
            )
        )  # fmt: skip
    elif kind == "gpt2":
        model = t.GPT2LMHeadModel(t.GPT2Config(n_embd=64, n_layer=2, n_head=8, n_positions=positions, **common))
    else:
        extra: dict[str, Any] = {"word_embed_proj_dim": 32} if kind == "opt-proj" else {}
        if kind == "opt-post":
            extra["do_layer_norm_before"] = False
        model = t.OPTForCausalLM(
            t.OPTConfig(
                hidden_size=64, ffn_dim=128, num_hidden_layers=2, num_attention_heads=8,
                max_position_embeddings=positions, **extra, **common,
            )
        )  # fmt: skip
    with torch.no_grad():  # random init leaves some weights at 0 or 1: make every weight count
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    return model.eval()


def inputs(model: Any) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config.json as a dict, the state dict)."""
    return model.config.to_dict(), dict(model.state_dict())


def prompt(seed: int, length: int) -> list[int]:
    ids: list[int] = torch.randint(3, VOCAB, (length,), generator=torch.Generator().manual_seed(seed)).tolist()
    return ids


@dataclass
class Greedy:
    tokens: list[int]
    logits: list[torch.Tensor]  # before each token was chosen


def reference(model: Any, ids: Sequence[int], new_tokens: int, forced: Sequence[int] | None = None) -> Greedy:
    """The CPU FP32 engine's greedy tokens (or, with `forced`, its logits along those tokens)."""
    raw, weights = inputs(model)
    engine = Decoder(read_config(raw), weights)
    cache = KVCache(engine.config, slots=1, max_len=len(ids) + new_tokens)
    logits = engine.forward(torch.tensor(list(ids)), [Segment(0, 0, len(ids))], cache)[0]
    out = Greedy([], [])
    for step in range(new_tokens):
        out.logits.append(logits)
        out.tokens.append(int(torch.argmax(logits)) if forced is None else forced[step])
        if step + 1 < new_tokens:
            logits = engine.forward(torch.tensor([out.tokens[-1]]), [Segment(0, len(ids) + step, 1)], cache)[0]
    return out


def first_difference(expected: Greedy, got: Sequence[int]) -> tuple[int | None, bool]:
    """(the first step where `got` differs from the reference, whether it is a near-tie there); (None, False) if
    they agree."""
    for step, (want, have) in enumerate(zip(expected.tokens, got, strict=True)):
        if want != have:
            top = torch.topk(expected.logits[step], 2).values
            return step, float(top[0] - top[1]) <= NEAR_TIE
    return None, False
