"""Decoding steps through the layers of a Llama-family decoder compiled with TorchScript.

At one stream a step is ~30 layers of ~15 small calls each around four matrix products; from Python each call costs
a few microseconds of interpreter and dispatch, which at INT8 was as much as the products themselves. The same
layers scripted run those calls in TorchScript's interpreter. Measured on the demo model (SmolLM2-135M, INT8,
machine A: AMD EPYC, 2 vCPUs, avx512f/vnni/bf16, 2 threads): the 30 layers took 12.0-13.3 ms as Python modules and
7.7-8.2 ms scripted, the same calls in the same order.

Steps where every sequence decodes one token go this way: one sequence alone (`forward`: plain copies into its slot,
one SDPA call) or several (`batch`: decoder.py's masked matmuls over the slots, the same operations). Steps with a
prompt chunk stay in decoder.py's Python layers. Families other than Llama's layout (RMSNorm,
rotary embeddings, gated SiLU MLP: Llama, Mistral, Qwen2, SmolLM2) return None and keep the Python path.
(No `from __future__ import annotations` here: TorchScript reads the annotations of what it compiles as objects.)
"""

import warnings
from typing import TYPE_CHECKING, Optional

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from container.generation.decoder import Decoder


class _LlamaLayer(torch.nn.Module):
    def __init__(self, decoder: "Decoder", index: int) -> None:
        super().__init__()
        c, layer = decoder.config, decoder.layers[index]
        self.norm1, self.norm2 = layer.norm1[0], layer.norm2[0]
        self.qkv, self.out, self.up, self.down = layer.qkv, layer.out, layer.up, layer.down
        self.heads, self.kv_heads, self.head_dim, self.eps = c.heads, c.kv_heads, c.head_dim, c.norm_eps
        self.gqa = c.heads != c.kv_heads

    def forward(
        self, x: torch.Tensor, rotation: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, position: int
    ) -> torch.Tensor:
        """x [1, hidden]; keys/values: this layer's cache of the sequence's slot, [kv_heads, max_len, head_dim]."""
        qk, v = self._qkv(x, rotation)
        keys[:, position] = qk[0, self.heads :]
        values[:, position] = v[0]
        attended = F.scaled_dot_product_attention(
            qk[:, : self.heads].unsqueeze(2),
            keys[:, : position + 1].unsqueeze(0),
            values[:, : position + 1].unsqueeze(0),
            enable_gqa=self.gqa,
        )
        x = x + self.out(attended.view(1, self.heads * self.head_dim))
        return self._mlp(x)

    def _qkv(self, x: torch.Tensor, rotation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The normed input's query and key heads, rotated together ([n, heads + kv_heads, head_dim]), and its value
        heads ([n, kv_heads, head_dim])."""
        n = x.shape[0]
        qkv = self.qkv(F.rms_norm(x, [x.shape[-1]], self.norm1, self.eps))
        width = (self.heads + self.kv_heads) * self.head_dim
        qk = torch.matmul(qkv[:, :width].view(n, self.heads + self.kv_heads, self.head_dim), rotation)
        return qk, qkv[:, width:].view(n, self.kv_heads, self.head_dim)

    def _mlp(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.up(F.rms_norm(x, [x.shape[-1]], self.norm2, self.eps)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate).mul_(up))

    @torch.jit.export
    def batch(
        self,
        x: torch.Tensor,
        rotation: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        slots: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        top: int,
        longest: int,
    ) -> torch.Tensor:
        """Several sequences decoding one token each (decoder.py's _decode_attention, the same operations): x [n,
        hidden], row i the sequence in cache slot slots[i] at positions[i]; keys/values this layer's whole cache."""
        n = x.shape[0]
        qk, v = self._qkv(x, rotation)
        keys[slots, :, positions] = qk[:, self.heads :]
        values[slots, :, positions] = v
        group = self.heads // self.kv_heads
        query = qk.new_zeros(top, self.kv_heads, group, self.head_dim)
        query[slots] = qk[:, : self.heads].reshape(n, self.kv_heads, group, self.head_dim) * (self.head_dim**-0.5)
        scores = torch.matmul(query, keys[:top, :, :longest].transpose(-1, -2)).add_(mask)
        attended = torch.matmul(torch.softmax(scores, dim=-1), values[:top, :, :longest])
        x = x + self.out(attended[slots].reshape(n, self.heads * self.head_dim))
        return self._mlp(x)


class _Layers(torch.nn.Module):
    def __init__(self, decoder: "Decoder") -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([_LlamaLayer(decoder, i) for i in range(len(decoder.layers))])

    def forward(
        self,
        x: torch.Tensor,
        rotation: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        position: int,
    ) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x, rotation, keys[index], values[index], position)
        return x

    @torch.jit.export
    def batch(
        self,
        x: torch.Tensor,
        rotation: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        slots: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        top: int,
        longest: int,
    ) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            # Each layer is a _LlamaLayer; mypy sees a ModuleList's Module, whose attributes are tensors.
            x = layer.batch(x, rotation, keys[index], values[index], slots, positions, mask, top, longest)  # type: ignore[operator]
        return x


def script_layers(decoder: "Decoder") -> Optional[torch.jit.ScriptModule]:  # noqa: UP045
    """The decoder's layers for decoding steps, scripted; None for a family this path does not cover."""
    c = decoder.config
    if c.family != "llama" or not c.norm_before:
        return None
    with warnings.catch_warnings():  # TorchScript is in maintenance upstream: its notices are not the user's
        warnings.simplefilter("ignore")
        return torch.jit.script(_Layers(decoder).eval())
