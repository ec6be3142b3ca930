"""Rounding fp32 values to the auto-cast types the way the NeuronCore datapath does (round to nearest even).

The functions are plain tensor code so `torch.jit.trace` records them into the emulated graph; the cost model
recognises nodes recorded from this file as auto-cast conversions (free on the hardware: done by the engines).
"""

from __future__ import annotations

import torch

FP8_E4M3_MAX = 448.0  # OCP e4m3fn: saturate instead of overflowing to NaN


def round_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def round_fp16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float16).to(torch.float32)


def round_tf32(x: torch.Tensor) -> torch.Tensor:
    """Keep 11 significant bits (10 stored): round the frexp mantissa to 1/2048, ties to even, in fp64."""
    mantissa, exponent = torch.frexp(x.double())
    rounded = torch.round(mantissa * 2048.0) * torch.pow(2.0, (exponent - 11).double())
    return torch.where(torch.isfinite(x), rounded.float(), x)


def round_fp8_e4m3(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)


ROUNDERS = {
    "bf16": round_bf16,
    "fp16": round_fp16,
    "tf32": round_tf32,
    "fp8_e4m3": round_fp8_e4m3,
}


def round_to(x: torch.Tensor, kind: str) -> torch.Tensor:
    """`x` rounded to the auto-cast type `kind` (as fp32); non-fp32 tensors come back unchanged."""
    if x.dtype != torch.float32:
        return x
    return ROUNDERS[kind](x)
