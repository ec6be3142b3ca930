"""Static shapes: which bucket a prompt and a generation step run in, and that buckets do not change the tokens."""

from __future__ import annotations

import pytest

from neuron_emu.llm import compile_decoder, default_buckets
from neuron_emu.llm.buckets import bucket_for, check_buckets
from neuron_emu.llm.errors import ContextLengthError, DecoderCompileError
from tests.neuron_emu.llm.tiny import Greedy, first_difference, inputs, prompt, tiny_model


def test_default_buckets_are_powers_of_two_from_128_then_max_length() -> None:
    assert default_buckets(2048) == (128, 256, 512, 1024, 2048)
    assert default_buckets(4096 + 100) == (128, 256, 512, 1024, 2048, 4096, 4196)
    assert default_buckets(128) == (128,)
    assert default_buckets(64) == (64,)
    assert bucket_for(300, default_buckets(2048), "a prompt") == 512  # a 300-token prompt runs in the 512 bucket
    assert bucket_for(128, default_buckets(2048), "a prompt") == 128
    with pytest.raises(ContextLengthError, match="a prompt needs 2049 positions, past max_length 2048"):
        bucket_for(2049, default_buckets(2048), "a prompt")


def test_buckets_are_sorted_and_must_end_at_max_length() -> None:
    assert check_buckets([64, 16, 32, 16], 64) == (16, 32, 64)
    with pytest.raises(DecoderCompileError, match=r"the largest bucket \(32\) must equal max_length \(64\)"):
        check_buckets([16, 32], 64)
    with pytest.raises(DecoderCompileError, match="positive integer"):
        check_buckets([0, 64], 64)


def test_a_prompt_in_one_bucket_generating_into_the_next_gives_the_single_bucket_tokens() -> None:
    model = tiny_model("llama", positions=64)
    raw, weights = inputs(model)
    bucketed = compile_decoder(raw, weights, tp_degree=2, buckets=(16, 32, 64), auto_cast="none")
    single = compile_decoder(raw, weights, tp_degree=2, max_length=64, buckets=(64,), auto_cast="none")
    assert bucketed.max_length == 64 and bucketed.buckets == (16, 32, 64) and single.buckets == (64,)
    ids = prompt(31, 12)
    # The single-bucket decoder's greedy run, with its logits (for the near-tie rule of test_agreement).
    expected = Greedy([], [])
    logits = single.context_encode(0, ids)
    for step in range(40):
        expected.logits.append(logits)
        expected.tokens.append(int(logits.argmax()))
        logits = single.token_generate({0: expected.tokens[-1]}, {0: len(ids) + step})[0]
    got: list[int] = []
    logits = bucketed.context_encode(0, ids)
    used = [bucketed.last_bucket]
    for step in range(40):
        got.append(int(logits.argmax()))
        logits = bucketed.token_generate({0: got[-1]}, {0: len(ids) + step})[0]
        used.append(bucketed.last_bucket)
    differs, near_tie = first_difference(expected, got)
    assert differs is None or near_tie, f"token {differs}: {got[differs]} in buckets, {expected.tokens[differs]} in one"
    # Context in 16; a step feeding position p needs p + 1 positions: 16 up to position 15, 32 up to 31, then 64.
    assert used[0] == ("context", 16)
    assert used[1:] == [("token", 16)] * 4 + [("token", 32)] * 16 + [("token", 64)] * 20
