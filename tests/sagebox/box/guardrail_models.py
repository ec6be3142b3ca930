"""Servable model directories for deployment tests: a good one, one that answers 500, one that is slow, one that
is slower still, and one that answers differently from the good one (other weights: a shadow candidate).

Each is a real model directory (manifest, TorchScript graph, tokenizer) that loads and passes the serving
container's warm-up: the warm-up feeds the word "warm" (container/qa.py, `filler_feature`), and the graph
misbehaves only on inputs without it, i.e. on every real question of these tests. The failing graph raises
(the server answers 500); the slow one runs a chain of small element-wise ops first (tiny tensors, so the time does
not depend on the intra-op thread count: ~16 us per step on the 2-core machine, measured with
`torch.jit.script` and `time.perf_counter`, 1 and 2 threads alike).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch
from torch import nn

from container.manifest import SourceSpec
from tests.container.toy_model import save_torchscript_model_dir

Behaviour = Literal["good", "fail", "slow", "slower", "other"]
WARM_WORD = "warm"
# ~0.25 s per model call at ~16 us per step.
SLOW_STEPS = 15_000
# ~2 s per model call: long enough that a second request certainly arrives while the first is in flight.
SLOWER_STEPS = 8 * SLOW_STEPS


class GuardedQA(nn.Module):
    def __init__(self, warm_id: int, mode: int, steps: int, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.weights = nn.Parameter(torch.randn(30522, 2, generator=generator), requires_grad=False)
        self.warm_id = warm_id
        self.mode = mode
        self.steps = steps

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.weights[input_ids]
        if not bool((input_ids == self.warm_id).any()):
            if self.mode == 1:
                raise RuntimeError("this test model fails every real question")
            if self.mode == 2:
                spin = torch.full([64], 0.01)
                for _ in range(self.steps):
                    spin = torch.tanh(spin * 1.0001 + 0.01)
                logits = logits + spin.sum() * 0.0
        return logits[..., 0].contiguous(), logits[..., 1].contiguous()


def build_model_dir(out: Path, tokenizer_path: Path, behaviour: Behaviour, steps: int = SLOW_STEPS) -> Path:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    warm_id = tokenizer.token_to_id(WARM_WORD)
    assert warm_id is not None
    mode = {"good": 0, "fail": 1, "slow": 2, "slower": 2, "other": 0}[behaviour]
    steps = SLOWER_STEPS if behaviour == "slower" else steps
    model = GuardedQA(warm_id, mode, steps, seed=1 if behaviour == "other" else 0)
    source = SourceSpec(name=f"guardrail-{behaviour}", architecture="GuardedQA")
    return save_torchscript_model_dir(out, model, tokenizer_path, source)
