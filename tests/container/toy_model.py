"""A toy QA graph with switches for tests: a token that makes it fail, and one that makes it slow.

The logits come from a tiny embedding, so answers are deterministic; the switches let tests reach the
server's 500 path and hold a request in flight (SIGTERM draining, micro-batching) without timing games.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from torch import nn

from container.manifest import SourceSpec
from sagebox.pipeline.artifact import staged_dir, write_manifest

# Words of the uncased WordPiece vocabulary that are single tokens.
FAIL_WORD = "explode"
SLOW_WORD = "sleepy"


class ToyQA(nn.Module):
    def __init__(self, fail_id: int, slow_id: int, slow_steps: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.weights = nn.Parameter(torch.randn(30522, 2, generator=generator), requires_grad=False)
        self.fail_id = fail_id
        self.slow_id = slow_id
        self.slow_steps = slow_steps

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if bool((input_ids == self.fail_id).any()):
            raise RuntimeError("toy model asked to fail")
        logits = self.weights[input_ids]
        if bool((input_ids == self.slow_id).any()):
            x = torch.ones(128, 128) / 128.0
            for _ in range(self.slow_steps):
                x = torch.tanh(x @ x + 1.0)  # stays near 1: no denormals, whatever the CPU flags
            logits = logits + x.mean() * 0.0
        return logits[..., 0].contiguous(), logits[..., 1].contiguous()


def build_toy_model_dir(out: Path, tokenizer_path: Path, slow_steps: int = 40000) -> Path:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    fail_id = tokenizer.token_to_id(FAIL_WORD)
    slow_id = tokenizer.token_to_id(SLOW_WORD)
    assert fail_id is not None and slow_id is not None
    module = torch.jit.script(ToyQA(fail_id, slow_id, slow_steps).eval())
    with staged_dir(out) as staging:
        torch.jit.save(module, str(staging / "model.pt"))
        shutil.copyfile(tokenizer_path, staging / "tokenizer.json")
        write_manifest(
            staging,
            variant="fp32",
            runtime="torchscript",
            model_file="model.pt",
            buckets=[64, 128, 256, 384],
            max_length=384,
            source=SourceSpec(name="toy", architecture="ToyQA"),
        )
    return out
