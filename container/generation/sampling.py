"""Choosing each next token from the model's logits, one request at a time.

The processing is transformers' generate() with the same settings, in its order: the repetition penalty over the
prompt's and the generated tokens (RepetitionPenaltyLogitsProcessor), then, when sampling, the temperature, top-k and
top-p warpers (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, each keeping at least one token), then a
draw from the softmax; greedy takes the arg-max. Each request samples from its own seeded generator over its own row
of logits, so its tokens depend only on it and its seed, never on which requests share its batch. A sampling request
without a seed gets one drawn here and reported back (TGI's `details.seed`), so any answer can be reproduced.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from container.generation.request import Sampling


@dataclass(frozen=True)
class Choice:
    token: int
    logprob: float  # log-probability of the token under the processed distribution


class Sampler:
    def __init__(self, sampling: Sampling) -> None:
        self.sampling = sampling
        self.seed: int | None = None
        self._generator: torch.Generator | None = None
        if sampling.do_sample:
            self.seed = sampling.seed if sampling.seed is not None else secrets.randbits(63)
            self._generator = torch.Generator().manual_seed(self.seed)

    @property
    def uses_history(self) -> bool:
        """Whether choosing needs the tokens seen so far (only the repetition penalty reads them)."""
        return self.sampling.repetition_penalty != 1.0

    def process(self, logits: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
        """The scores a token is chosen from: `logits` [vocab] (float32) of the last position, `seen` the token ids of
        the prompt and of what was generated so far (int64)."""
        scores = logits.float().clone()
        penalty = self.sampling.repetition_penalty
        if penalty != 1.0 and seen.numel():
            picked = scores.gather(0, seen)
            scores.scatter_(0, seen, torch.where(picked < 0, picked * penalty, picked / penalty))
        if not self.sampling.do_sample:
            return scores
        if self.sampling.temperature != 1.0:
            scores = scores / self.sampling.temperature
        top_k = min(self.sampling.top_k, scores.numel())
        if top_k > 0:
            kth = torch.topk(scores, top_k).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if self.sampling.top_p < 1.0:
            ascending, order = torch.sort(scores, descending=False)
            cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
            drop = cumulative <= (1 - self.sampling.top_p)
            drop[-1] = False  # keep at least the most likely token
            scores = scores.masked_fill(drop.scatter(0, order, drop), float("-inf"))
        return scores

    def choose(self, logits: torch.Tensor, seen: torch.Tensor) -> Choice:
        scores = self.process(logits, seen)
        logprobs = torch.log_softmax(scores, dim=-1)
        if self._generator is None:
            token = int(torch.argmax(scores))
        else:
            token = int(torch.multinomial(logprobs.exp(), 1, generator=self._generator))
        return Choice(token, float(logprobs[token]))
