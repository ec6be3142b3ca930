"""Greedy tokens of the emulated decoder against the CPU FP32 engine (container.generation.decoder), every family,
tp 1 to 8 (llama's 2 key/value heads split at tp 2, replicated at tp 4 and 8).

fp32 (auto_cast="none"): the tokens must be the engine's; a difference is excused only at a near-tie (the engine's
top two logits within 1e-3 at the first differing step: either token is a correct greedy choice), and counted.
bf16 auto-cast (the default): agreement is counted teacher-forced: at each of 64 steps the emulated decoder is fed
the engine's tokens so far and must pick the engine's next token; a step picking another counts against it (a
free-running run would compare every later step against a different history once one step differs). At least
90 % of the 64 steps must agree for every prompt; the free-running common prefix is reported too.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from neuron_emu.llm import compile_decoder
from tests.neuron_emu.llm.tiny import Greedy, first_difference, inputs, prompt, reference, tiny_model

NEW_TOKENS = 32
BF16_TOKENS = 64
PROMPTS = ((11, 12), (12, 5))  # (seed, length)
_models: dict[str, tuple[Any, list[list[int]], list[Greedy]]] = {}


def _family(kind: str) -> tuple[Any, list[list[int]], list[Greedy]]:
    """The tiny model, the prompts and the engine's greedy tokens for them (built once per module)."""
    if kind not in _models:
        model = tiny_model(kind, positions=64)
        prompts = [prompt(seed, length) for seed, length in PROMPTS]
        _models[kind] = (model, prompts, [reference(model, p, NEW_TOKENS) for p in prompts])
    return _models[kind]


def _check(kind: str, tp: int) -> None:
    model, prompts, expected = _family(kind)
    raw, weights = inputs(model)
    decoder = compile_decoder(raw, weights, tp_degree=tp, max_length=64, auto_cast="none")
    near_ties = 0
    for ids, greedy in zip(prompts, expected, strict=True):
        got = decoder.generate(ids, NEW_TOKENS)
        step, near_tie = first_difference(greedy, got)
        assert step is None or near_tie, (
            f"{kind} tp {tp}: token {step} is {got[step]}, the engine's {greedy.tokens[step]}"
        )
        near_ties += step is not None
    print(f"{kind} tp {tp}: {len(prompts)} prompts x {NEW_TOKENS} tokens equal to the engine's, near-ties {near_ties}")


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("kind", ["llama", "gpt2", "opt"])
def test_fp32_greedy_tokens_equal_the_cpu_engine(kind: str, tp: int) -> None:
    _check(kind, tp)


@pytest.mark.parametrize("kind", ["qwen2", "opt-post", "opt-proj"])
def test_fp32_greedy_tokens_equal_the_cpu_engine_for_the_other_layouts(kind: str) -> None:
    """Query/key/value biases and tied embeddings, OPT-350m's norms after each block, OPT's project_in/out."""
    _check(kind, 2)


@pytest.mark.parametrize("kind", ["llama", "gpt2", "opt"])
def test_bf16_auto_cast_agrees_on_at_least_90_percent_of_64_greedy_steps(kind: str) -> None:
    model = tiny_model(kind, positions=128)
    raw, weights = inputs(model)
    decoder = compile_decoder(raw, weights, tp_degree=2, max_length=128)  # auto-cast matmult, bf16: the default
    assert decoder.auto_cast == "matmult"
    for seed in (21, 22):
        ids = prompt(seed, 8)
        engine = reference(model, ids, BF16_TOKENS)
        logits = decoder.context_encode(0, ids)
        agree = 0
        for step, token in enumerate(engine.tokens):
            agree += int(torch.argmax(logits)) == token
            if step + 1 < BF16_TOKENS:
                logits = decoder.token_generate({0: token}, {0: len(ids) + step})[0]
        free = decoder.generate(ids, BF16_TOKENS)
        prefix = next((i for i, (a, b) in enumerate(zip(engine.tokens, free, strict=True)) if a != b), BF16_TOKENS)
        print(f"{kind} bf16 prompt {seed}: teacher-forced {agree}/64 steps agree, free-running prefix {prefix}/64")
        assert agree >= 0.9 * BF16_TOKENS, f"{kind}: only {agree} of {BF16_TOKENS} bf16 steps pick the fp32 token"
