"""INT8 decoder weights as an artifact holds them: transformers' names, int8 values, one scale per output channel.

Every matrix a linear layer multiplies by is quantized, the embeddings (and so a tied output layer) included: for a
weight `X.weight`, the safetensors file holds `X.weight` as int8 and `X.weight_scale` as float32 shaped to broadcast
over it ([out, 1], or [1, out] for GPT-2's Conv1D, which keeps its weight as [in, out]), so that the weight is
`X.weight * X.weight_scale` whatever the layout. Norms, biases and learned positions stay FP32. Symmetric,
per-channel (linear.quantize_rows, the rounding the engine's INT8 layers use): each output channel's largest
magnitude maps to 127, so quantizing the dequantized weight again gives
the same integers (the engine packs its INT8 kernels from them: container/generation/linear.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from container.generation.linear import quantize_rows
from neuron_emu.llm.config import DecoderConfig

SCALE_SUFFIX = "_scale"
# Not multiplied by as a matrix: kept FP32.
_KEPT = ("norm", "ln_", "wpe.", "embed_positions.")
# GPT-2's Conv1D layers: weight [in, out].
_CONV1D = (".attn.c_attn.", ".attn.c_proj.", ".mlp.c_fc.", ".mlp.c_proj.")


def quantized_names(config: DecoderConfig, weights: Mapping[str, torch.Tensor]) -> list[str]:
    """The weights an INT8 artifact stores as int8: every 2-D `.weight` of a linear layer or the embeddings."""
    return sorted(
        name
        for name, tensor in weights.items()
        if name.endswith(".weight") and tensor.dim() == 2 and not any(part in name for part in _KEPT)
    )


def _channel_axis(config: DecoderConfig, name: str) -> int:
    return 1 if config.family == "gpt2" and any(part in f".{name}" for part in _CONV1D) else 0


def quantize_weights(config: DecoderConfig, weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """FP32 weights -> an INT8 artifact's tensors (the rest copied as they are)."""
    chosen = set(quantized_names(config, weights))
    out: dict[str, torch.Tensor] = {}
    for name, tensor in weights.items():
        if name not in chosen:
            out[name] = tensor.contiguous()
            continue
        if _channel_axis(config, name) == 0:
            q, scale = quantize_rows(tensor)
            out[name], out[name + SCALE_SUFFIX] = q.contiguous(), scale[:, None].contiguous()
        else:  # GPT-2's Conv1D: output channels are columns
            q, scale = quantize_rows(tensor.t())
            out[name], out[name + SCALE_SUFFIX] = q.t().contiguous(), scale[None, :].contiguous()
    return out


def is_quantized(weights: Mapping[str, torch.Tensor]) -> bool:
    return any(name.endswith(SCALE_SUFFIX) for name in weights)


def dequantize(weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """An INT8 artifact's tensors -> float weights under transformers' names (FP32 weights pass through)."""
    if not is_quantized(weights):
        return dict(weights)
    out: dict[str, torch.Tensor] = {}
    for name, tensor in weights.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = weights.get(name + SCALE_SUFFIX)
        if scale is None:
            out[name] = tensor
        elif tensor.dtype != torch.int8:
            raise ValueError(f"{name} has a scale ({name}{SCALE_SUFFIX}) but is {tensor.dtype}, not int8")
        else:
            out[name] = tensor.float() * scale.float()
    return out
