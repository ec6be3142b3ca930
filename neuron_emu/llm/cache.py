"""The KV cache "on the device": per rank, held by the runtime and updated in place by the graphs.

Each rank (NeuronCore) holds keys and values [layers, batch_size, kv_heads/tp, max_length, head_dim] for the key/value
heads it computes (one, replicated, when tp > kv_heads): 2 x layers x batch x kv_heads/tp x max_length x head_dim
elements per rank, in the model's dtype (the checkpoint's floating dtype: fp32 weights give an fp32 cache, bf16
weights a bf16 one). Allocated zeroed when the decoder is built or loaded (masked positions are read as zeros times
a zero weight, never as uninitialised memory), resident from then on: the host sends token ids and positions per
step, never the cache. A batch line's context encoding overwrites positions 0..bucket-1 of that line; positions
past a line's length hold stale values that attention masks out.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

Tensor = torch.Tensor
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class KVCache:
    keys: Tensor
    values: Tensor

    @classmethod
    def allocate(cls, shape: tuple[int, ...], dtype: torch.dtype) -> KVCache:
        return cls(torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype))

    @property
    def nbytes(self) -> int:
        return 2 * self.keys.numel() * self.keys.element_size()
