"""The limits of a text-generation model's INT8 gate (generation_gate.py), with the reasons for their defaults.
Kept apart from the measuring code so that the CLI reads them without importing torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sagebox.errors import SageboxError

# Measured on the demo model (SmolLM2-135M-Instruct; perplexity ratio on the held-out text, greedy agreement on the
# 16 chat prompts x 32 tokens, all prompts prefilled in one step) for the engine's INT8 and other roundings:
#   FP32 with bfloat16-rounded weights       agreement 0.945
#   int8 weights per channel, FP32 compute   agreement 0.617, ratio 1.0055
#   the engine's INT8 (W8A8, per token)      agreement 0.369, ratio 1.040 (first difference at token 10 on average)
#   6-bit weights per channel                agreement 0.262, ratio 1.092
#   int8 weights per tensor                  agreement 0.186, ratio 1.067
#   4-bit weights per channel                agreement 0.037, ratio 3.54
# Through the engine's scheduler, as the gate runs them (prefill in chunks beside decode steps), the engine's INT8
# scores 0.357, ratio 1.040.

# INT8's perplexity at most 5% above FP32's: the engine's INT8 costs 4.0% on the demo model, the coarser roundings
# above 6.7% and more.
DEFAULT_MAX_PERPLEXITY_RATIO = 1.05
# At least a quarter of the greedy tokens equal to FP32's. Agreement on a small model is mostly about near-ties:
# bfloat16 weights already leave 5% of the positions different, int8 weights alone 38%, since after one flipped
# near-tie an answer goes on differently; so a working INT8 model scores 0.36 here. The floor is a tripwire for what
# perplexity cannot see (it scores whole windows: a fault of the decode path, one token at a time against the
# key/value cache, leaves it unchanged while agreement falls to chance, ~0.04 as with 4-bit weights) and for answers
# that part from FP32's within the first few tokens (int8 weights per tensor: 0.19). One prompt is 1/16 of the share:
# the working model sits nearly two prompts (0.107) above the floor. A floor near 0.5 needs a more faithful INT8: with
# the activations of the output layer and of the MLPs' down projections left in FP32 it measured 0.53, ratio 1.023.
DEFAULT_MIN_AGREEMENT = 0.25


@dataclass(frozen=True)
class GenerationLimits:
    max_perplexity_ratio: float = DEFAULT_MAX_PERPLEXITY_RATIO
    min_agreement: float = DEFAULT_MIN_AGREEMENT

    def __post_init__(self) -> None:
        if not math.isfinite(self.max_perplexity_ratio) or self.max_perplexity_ratio <= 0:
            raise SageboxError(f"--max-perplexity-ratio must be a finite number > 0, got {self.max_perplexity_ratio}")
        if not 0.0 <= self.min_agreement <= 1.0:
            raise SageboxError(f"--min-agreement must be between 0 and 1, got {self.min_agreement}")

    def to_dict(self) -> dict[str, float]:
        return {"max_perplexity_ratio": self.max_perplexity_ratio, "min_agreement": self.min_agreement}
