"""Next-token choice equals transformers' generate() processing, and a request's draws depend only on its seed."""

from __future__ import annotations

from typing import cast

import pytest
import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from container.generation.request import Sampling
from container.generation.sampling import Sampler

VOCAB = 1000


def _logits(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(VOCAB, generator=generator) * 4
    seen = torch.randint(0, VOCAB, (40,), generator=generator)
    return logits, seen


def _reference(sampling: Sampling) -> LogitsProcessorList:
    chain = LogitsProcessorList()
    if sampling.repetition_penalty != 1.0:
        chain.append(RepetitionPenaltyLogitsProcessor(sampling.repetition_penalty))
    if sampling.do_sample:
        if sampling.temperature != 1.0:
            chain.append(TemperatureLogitsWarper(sampling.temperature))
        if sampling.top_k:
            chain.append(TopKLogitsWarper(sampling.top_k))
        if sampling.top_p < 1.0:
            chain.append(TopPLogitsWarper(sampling.top_p))
    return chain


@pytest.mark.parametrize(
    "sampling",
    [
        Sampling(False, repetition_penalty=1.3),
        Sampling(True, temperature=0.7, seed=1),
        Sampling(True, top_k=50, seed=1),
        Sampling(True, top_p=0.9, seed=1),
        Sampling(True, temperature=1.4, top_k=200, top_p=0.8, repetition_penalty=1.15, seed=1),
        Sampling(True, top_p=0.05, seed=1),
    ],
)
def test_the_processed_scores_equal_transformers_processors(sampling: Sampling) -> None:
    for case in range(5):
        logits, seen = _logits(case)
        ours = Sampler(sampling).process(logits, seen)
        theirs = _reference(sampling)(cast(torch.LongTensor, seen[None, :]), logits[None, :].clone())[0]
        assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
        finite = ~torch.isinf(theirs)
        assert torch.allclose(ours[finite], theirs[finite], rtol=1e-6, atol=1e-6)


def test_greedy_takes_the_arg_max_after_the_penalty() -> None:
    logits = torch.tensor([0.0, 5.0, 4.5, -1.0])
    seen = torch.tensor([1])
    assert Sampler(Sampling()).choose(logits, seen).token == 1
    choice = Sampler(Sampling(repetition_penalty=2.0)).choose(logits, seen)  # 5.0 / 2 < 4.5
    assert choice.token == 2
    assert choice.logprob == pytest.approx(float(torch.log_softmax(torch.tensor([0.0, 2.5, 4.5, -1.0]), 0)[2]))


def test_a_seeded_request_draws_the_same_tokens_whatever_shares_its_batch() -> None:
    sampling = Sampling(True, temperature=1.2, top_p=0.95, seed=1234)
    alone = Sampler(sampling)
    batched = Sampler(sampling)
    neighbours = [Sampler(Sampling(True, seed=seed)) for seed in range(3)]
    seen = torch.tensor([], dtype=torch.int64)
    tokens_alone, tokens_batched = [], []
    for step in range(30):
        logits, _ = _logits(100 + step)
        tokens_alone.append(alone.choose(logits, seen).token)
        for neighbour in neighbours:  # other requests draw in between, from their own generators
            neighbour.choose(logits, seen)
        tokens_batched.append(batched.choose(logits, seen).token)
    assert tokens_alone == tokens_batched
    assert len(set(tokens_alone)) > 5  # it did sample, not always take the same token


def test_a_request_without_a_seed_gets_one_that_replays_it() -> None:
    first = Sampler(Sampling(True, temperature=1.5))
    assert first.seed is not None
    replay = Sampler(Sampling(True, temperature=1.5, seed=first.seed))
    seen = torch.tensor([], dtype=torch.int64)
    for step in range(10):
        logits, _ = _logits(step)
        assert first.choose(logits, seen) == replay.choose(logits, seen)
    assert Sampler(Sampling()).seed is None  # greedy draws nothing


def test_top_k_of_one_is_greedy() -> None:
    seen = torch.tensor([], dtype=torch.int64)
    for step in range(10):
        logits, _ = _logits(step)
        assert Sampler(Sampling(True, top_k=1, seed=step)).choose(logits, seen).token == int(torch.argmax(logits))
