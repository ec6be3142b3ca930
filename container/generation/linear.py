"""The decoder's linear layers: FP32, or INT8 weights with activations quantized per token as they come.

INT8 (`Int8Linear`): per-output-channel symmetric int8 weights, packed once for FBGEMM (in the CPU build of torch);
each call quantizes its input to uint8 and multiplies in integers (AVX-512 VNNI where the CPU has it, AVX2 otherwise),
the int32 sums scaled back to float. The step reads a quarter of the FP32 weight bytes, which is what bounds a
decoder's step at small batches (the demo model: ~540 MB of FP32 weights per step).

Candidates measured for this (machine A: AMD EPYC, 2 vCPUs, avx512f/vnni/bf16, no AMX; 2 threads; SmolLM2-135M's
shapes, 30 distinct weights per shape so they come from memory, ms per call at 1 / 16 tokens):
- FP32 `F.linear`: 0.68 / 1.04 (576 -> 3,072), 10.6 / 26.7 (the 576 -> 49,152 output layer);
- torch's weight-only `_weight_int8pack_mm` (int8 weights, float activations): 0.90 / 16.9 and 12.6 / 367: slower
  than FP32 on this CPU, worst at 16 tokens;
- torch's `_weight_int4pack_mm_for_cpu` (int4, groups of 32): 1.59 / 25.2 and 25.4 / 418: slower still;
- FBGEMM dynamic INT8 (`quantized::linear_dynamic`): 0.10 / 0.19 and 0.91 / 3.46: 7x FP32 at 1 token, 8x at 16.
So INT8 here means INT8 weights and INT8 products, not weight-only: activations are quantized too.

FBGEMM picks one quantization range for the whole input (every row of the step). A step holds several sequences'
tokens (and a prompt chunk whose first token may carry the huge activations of an attention sink), so one row's range
would coarsen every other row's. Rows are therefore scaled to their own largest magnitude first, and two columns of
+1 and -1 (multiplied by zero weights) pin the range to [-1, 1]: each token is quantized by its own range, whatever
shares the step. One token alone is its own range already and skips the scaling.

Products get 8 x 8 bits only where the CPU has VNNI (AVX-512 VNNI or AMX: `vpdpbusd` sums its uint8 x int8
products straight into int32). Elsewhere (AVX2, AVX-512 without VNNI) FBGEMM multiplies with `vpmaddubsw`, which adds
each pair of products into a saturating int16: two products of 255 x 127 overflow it. There the weights take 7 bits
(63 levels a side: 2 x 255 x 63 fits), as ONNX Runtime's `reduce_range` does, and activations keep their 8 bits (a
token's range is set by its largest channel, so its other channels need the resolution more). Measured on machine E
(AMD EPYC, AVX2 only): a random 96 x 64 layer's relative error 0.0615 with 8-bit products, 0.0136 with 7-bit
activations; the demo LLM's INT8 gate (perplexity ratio to FP32 / greedy agreement): 1.143 / 0.215 with 8 x 8 bits,
1.111 / 0.148 with 7-bit activations, 1.059 / 0.232 with 7-bit weights (still under the default gate's 1.05 / 0.25:
there the demo deploys FP32 alone, sagebox/box/artifacts.py).

Both layers are torch modules that TorchScript compiles as they are (container/generation/scripted.py), so there are
no `from __future__` annotations here: TorchScript reads them as objects.
"""

import functools
import warnings
from typing import Optional, Protocol

import torch
import torch.nn.functional as F

from container.cpu_kind import cpu_flags, kind_of

# The quantized engine FBGEMM packs for (x86 CPUs; torch's default engine "x86" chooses between it and oneDNN).
ENGINE = "fbgemm"


class Linear(Protocol):
    """y = x W^T + b, for x of shape [tokens, in_features]."""

    out_features: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class DenseLinear(torch.nn.Module):
    bias: Optional[torch.Tensor]  # noqa: UP045 (TorchScript knows Optional, not X | None)

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:  # noqa: UP045
        super().__init__()
        self.weight = weight.float().contiguous()
        self.bias = None if bias is None else bias.float()
        self.out_features = int(weight.shape[0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


def quantize_rows(weight: torch.Tensor, levels: int = 127) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row (per output channel) int8: (q [out, in] int8, scale [out] float32), weight ~= q * scale,
    |q| <= levels (127; 63 for 7-bit weights)."""
    w = weight.float()
    scale = w.abs().amax(dim=1).clamp(min=1e-12) / float(levels)
    q = torch.round(w / scale[:, None]).clamp(-levels, levels).to(torch.int8)
    return q, scale


def _require_engine() -> None:
    if ENGINE not in torch.backends.quantized.supported_engines:
        raise RuntimeError(f"this torch build lacks the {ENGINE!r} quantized engine INT8 decoders need")
    if torch.backends.quantized.engine != ENGINE:
        torch.backends.quantized.engine = ENGINE


@functools.cache
def products_saturate() -> bool:
    """True where FBGEMM's INT8 products go through a saturating int16 (no VNNI): the real CPU's flags, never a kind
    forced by SAGEBOX_CPU_KIND, since this is about the instructions that run."""
    return kind_of(cpu_flags()) not in ("avx512_vnni", "amx")


def _prepack(q: torch.Tensor, scale: torch.Tensor) -> object:
    """FBGEMM's packed form of int8 weights with per-row scales. torch warns that quantized tensors are deprecated
    (a later release may drop them; Sagebox pins torch 2.13.0): the warning is for this one call, not the user's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        weight = torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros(len(q), dtype=torch.int64), 0)
    return torch.ops.quantized.linear_prepack(weight, None)


class Int8Linear(torch.nn.Module):
    bias: Optional[torch.Tensor]  # noqa: UP045 (TorchScript knows Optional, not X | None)

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> None:  # noqa: UP045
        """`weight` [out, in] float: quantized per row here (an INT8 artifact's dequantized weights quantize back to
        the same integers: each row's largest magnitude is exactly 127 of its scale; to 63 levels where products
        would saturate)."""
        super().__init__()
        _require_engine()
        self.weight_levels = 63 if products_saturate() else 127
        q, scale = quantize_rows(weight, self.weight_levels)
        out_features, in_features = q.shape
        padded = torch.cat([q, torch.zeros(out_features, 2, dtype=torch.int8)], dim=1)
        self.packed_pinned = _prepack(padded, scale)
        self.packed_single = _prepack(q.contiguous(), scale)  # one token alone: no pinning columns
        self.bias = None if bias is None else bias.float()
        self.out_features = int(out_features)
        self.in_features = int(in_features)
        self.pins = torch.tensor([[1.0, -1.0]])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 1:
            y = torch.ops.quantized.linear_dynamic(x, self.packed_single, False)
        else:
            magnitude = x.abs().amax(dim=1, keepdim=True).clamp_(min=1e-12)
            pinned = torch.cat([x / magnitude, self.pins.expand(x.shape[0], 2)], dim=1)
            y = torch.ops.quantized.linear_dynamic(pinned, self.packed_pinned, False).mul_(magnitude)
        bias = self.bias
        if bias is not None:
            y = y.add_(bias)
        return y


def make_linear(weight: torch.Tensor, bias: Optional[torch.Tensor], kind: str) -> Linear:  # noqa: UP045
    if kind == "int8":
        return Int8Linear(weight, bias)
    if kind == "fp32":
        return DenseLinear(weight, bias)
    raise ValueError(f"unknown linear kind {kind!r} (fp32, int8)")
