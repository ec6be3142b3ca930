"""A decoder compiled for NeuronCores under the engine: continuous batching over its fixed batch lines gives every
generation the CPU engine's tokens (FP32, auto-cast none), prompts go in whole through context encoding, and more
generations than lines wait for a free one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch

from container.generation.decoder import Decoder, KVCache, Segment
from container.generation.engine import Engine
from container.generation.neuron import NeuronSteps, shape_of
from container.generation.request import Sampling
from neuron_emu.llm.compile import compile_decoder
from neuron_emu.llm.config import read_config
from tests.container.generation.test_engine import Collect, FakeClock, _drain, _prompt
from tests.container.generation.tiny_decoders import engine_inputs, tiny_decoder

GREEDY = Sampling()
LINES = 3
PROMPT_LENGTHS = (5, 37, 1, 8, 2)


@pytest.fixture(scope="module")
def llama() -> Any:
    return tiny_decoder("llama", seed=3)


@pytest.fixture(scope="module")
def compiled(llama: Any) -> Any:
    raw, weights = engine_inputs(llama)
    return compile_decoder(raw, weights, batch_size=LINES, auto_cast="none")


class Recording(NeuronSteps):
    """NeuronSteps that keeps every step's segments."""

    def __init__(self, decoder: Any) -> None:
        super().__init__(decoder)
        self.steps: list[list[Segment]] = []

    def forward(self, tokens: torch.Tensor, segments: Sequence[Segment], cache: object = None) -> torch.Tensor:
        self.steps.append(list(segments))
        return super().forward(tokens, segments, cache)


def _alone(model: Any, prompt: list[int], max_new: int) -> list[int]:
    """The CPU engine's greedy tokens for one generation on its own."""
    raw, weights = engine_inputs(model)
    config = read_config(raw)
    engine = Engine(Decoder(config, weights), KVCache(config, 1, 64), FakeClock())
    collect = Collect()
    engine.submit(collect.job(prompt, GREEDY, max_new))
    _drain(engine)
    assert collect.outcome is not None
    return [t.id for t in collect.tokens]


def test_continuous_batching_over_the_lines_gives_each_generation_its_cpu_tokens(llama: Any, compiled: Any) -> None:
    steps = Recording(compiled)
    engine = Engine(steps, steps, FakeClock(), prefill_chunk=64, whole_prompts=True)
    prompts = [_prompt(i, n) for i, n in enumerate(PROMPT_LENGTHS)]
    collected = [Collect() for _ in prompts]
    for index, (prompt, collect) in enumerate(zip(prompts, collected, strict=True)):
        engine.submit(collect.job(prompt, GREEDY, 3 + index))
        engine.step()  # they arrive one a step: each joins a batch already decoding
    _drain(engine)
    for index, (prompt, collect) in enumerate(zip(prompts, collected, strict=True)):
        assert collect.outcome is not None
        assert [t.id for t in collect.tokens] == _alone(llama, prompt, 3 + index), index
    used = {segment.slot for step in steps.steps for segment in step}
    assert used == set(range(LINES))  # five generations took turns on the three lines
    assert max(len(step) for step in steps.steps) == LINES
    for step in steps.steps:  # a prompt went in whole, at position 0; the rest decoded one token each
        for segment in step:
            assert segment.start == 0 or segment.length == 1


def test_a_prompt_longer_than_the_prefill_budget_goes_in_whole_and_alone(llama: Any, compiled: Any) -> None:
    steps = Recording(compiled)
    engine = Engine(steps, steps, FakeClock(), prefill_chunk=16, whole_prompts=True)
    long, short = _prompt(1, 40), _prompt(2, 10)
    first, second = Collect(), Collect()
    engine.submit(first.job(short, GREEDY, 2))
    engine.submit(second.job(long, GREEDY, 2))
    engine.step()
    assert [(s.slot, s.start, s.length) for s in steps.steps[0]] == [(0, 0, 10)]  # 40 more tokens: not this step
    engine.step()
    assert [(s.start, s.length) for s in steps.steps[1]] == [(10, 1), (0, 40)]
    _drain(engine)
    assert [t.id for t in second.tokens] == _alone(llama, long, 2)


def test_the_adapter_refuses_a_prompt_split_in_chunks(compiled: Any) -> None:
    steps = NeuronSteps(compiled)
    with pytest.raises(ValueError, match="takes a prompt whole"):
        steps.forward(torch.tensor([4, 5, 6]), [Segment(0, 2, 3)])


def test_the_shape_says_what_was_compiled(compiled: Any) -> None:
    shape = shape_of(compiled, "none", "bf16")
    assert (shape.tensor_parallel, shape.batch_size, shape.max_length) == (1, LINES, 256)
    assert shape.buckets == (128, 256) and shape.auto_cast_type == "fp32"
    assert shape_of(compiled, "matmult", "bf16").auto_cast_type == "bf16"
