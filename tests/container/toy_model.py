"""A toy QA graph with a switch for tests: a token that makes it fail.

The logits come from a tiny seeded embedding, so answers are deterministic; the switch lets tests reach the
server's 500 path and a warm-up that fails. (Requests held in flight are held by the tests themselves: a body
sent by halves over a socket, or the gated handler of tests/container/fakes.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
from torch import nn

from container.manifest import SourceSpec
from sagebox.pipeline.export.artifact import staged_dir, write_manifest

# A word of the uncased WordPiece vocabulary that is a single token.
FAIL_WORD = "explode"


class ToyQA(nn.Module):
    def __init__(self, fail_id: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.weights = nn.Parameter(torch.randn(30522, 2, generator=generator), requires_grad=False)
        self.fail_id = fail_id

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if bool((input_ids == self.fail_id).any()):
            raise RuntimeError("toy model asked to fail")
        logits = self.weights[input_ids]
        return logits[..., 0].contiguous(), logits[..., 1].contiguous()


def build_toy_model_dir(out: Path, tokenizer_path: Path) -> Path:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    fail_id = tokenizer.token_to_id(FAIL_WORD)
    assert fail_id is not None
    return save_torchscript_model_dir(out, ToyQA(fail_id), tokenizer_path, SourceSpec(name="toy", architecture="ToyQA"))


def save_torchscript_model_dir(out: Path, model: nn.Module, tokenizer_path: Path, source: SourceSpec) -> Path:
    """`model` scripted into an FP32 TorchScript model directory (atomically) with the tokenizer and a manifest."""
    module = torch.jit.script(model.eval())
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
            source=source,
        )
    return out
