"""What compile_decoder and the runtime refuse, each in one line naming the reason."""

from __future__ import annotations

from typing import Any

import pytest

from neuron_emu.errors import NeuronEmuError
from neuron_emu.llm import CompiledDecoder, compile_decoder
from neuron_emu.llm.errors import ContextLengthError, DecoderCompileError, DecoderInputError
from tests.neuron_emu.llm.tiny import inputs, prompt, tiny_model


def _llama(heads: int = 8, kv_heads: int = 2, intermediate: int = 128) -> dict[str, Any]:
    return {
        "model_type": "llama", "hidden_size": 8 * heads, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "num_hidden_layers": 2, "vocab_size": 96, "intermediate_size": intermediate, "max_position_embeddings": 64,
    }  # fmt: skip


def _refused(error: type[Exception], match: str, config: dict[str, Any], **options: Any) -> None:
    """Refused before any weight is read (the weights here are empty)."""
    with pytest.raises(error, match=match) as caught:
        compile_decoder(config, {}, **options)
    assert isinstance(caught.value, NeuronEmuError) and "\n" not in str(caught.value)


def test_a_degree_that_does_not_divide_the_heads_is_refused() -> None:
    _refused(DecoderCompileError, "tp_degree 16 does not divide the model's 8 attention heads", _llama(), tp_degree=16)
    _refused(
        DecoderCompileError, "tp_degree 4 does not divide the model's 6 attention heads", _llama(6, 6), tp_degree=4
    )


def test_key_value_heads_must_split_or_replicate_evenly() -> None:
    _refused(
        DecoderCompileError, "tp_degree 2 does not divide the model's 3 key/value heads", _llama(12, 3), tp_degree=2
    )
    _refused(DecoderCompileError, "above the model's 3 key/value heads but not a multiple", _llama(12, 3), tp_degree=4)
    _refused(DecoderCompileError, "does not divide the model's MLP width 100", _llama(intermediate=100), tp_degree=8)


def test_a_degree_the_instance_family_or_neuronlink_does_not_allow_is_refused() -> None:
    _refused(DecoderCompileError, r"tp_degree 4 is not a tensor-parallel degree of trn1 instances \(1, 2, 8, 16, 32\)",
             _llama(), tp_degree=4, instance_family="trn1")  # fmt: skip
    _refused(
        DecoderCompileError, "tp_degree 3 is neither a power of two nor a listed degree", _llama(6, 6), tp_degree=3
    )
    _refused(DecoderCompileError, "no tensor-parallel degrees are known for instance family 'p4d'", _llama(),
             tp_degree=2, instance_family="p4d")  # fmt: skip
    _refused(DecoderCompileError, "tp_degree must be a positive integer", _llama(), tp_degree=0)


def test_lengths_buckets_and_auto_cast_are_checked() -> None:
    _refused(DecoderCompileError, "max_length 65 is past the model's 64 positions", _llama(), max_length=65)
    _refused(DecoderCompileError, r"largest bucket \(32\) must equal max_length \(64\)", _llama(), buckets=(16, 32),
             max_length=64)  # fmt: skip
    _refused(DecoderCompileError, "auto_cast 'all' is not one of: matmult, none", _llama(), auto_cast="all")
    _refused(DecoderCompileError, "batch_size must be a positive integer", _llama(), batch_size=0)
    _refused(DecoderCompileError, "the weights have no 'model.embed_tokens.weight'", _llama(), max_length=16)


@pytest.fixture(scope="module")
def short() -> CompiledDecoder:
    raw, weights = inputs(tiny_model("opt", positions=32))
    return compile_decoder(raw, weights, batch_size=2, max_length=16, auto_cast="none")


def test_prompts_and_generation_past_max_length_are_refused(short: CompiledDecoder) -> None:
    with pytest.raises(ContextLengthError, match="a prompt of 17 tokens is past max_length 16"):
        short.context_encode(0, prompt(61, 17))
    with pytest.raises(ContextLengthError, match="a prompt of 10 tokens and 7 new ones is past max_length 16"):
        short.generate(prompt(61, 10), 7)
    assert len(short.generate(prompt(61, 10), 6)) == 6  # exactly max_length fits
    short.context_encode(1, prompt(62, 16))
    with pytest.raises(ContextLengthError, match="position 16 of line 1 is past max_length 16"):
        short.token_generate({1: 5}, {1: 16})


def test_bad_lines_tokens_and_positions_are_refused(short: CompiledDecoder) -> None:
    cases: list[tuple[str, Any]] = [
        ("batch line 2 is not one of 0..1", lambda: short.context_encode(2, [5])),
        ("token id 96 is outside the vocabulary", lambda: short.context_encode(0, [5, 96])),
        ("the prompt is empty", lambda: short.context_encode(0, [])),
        ("tokens name lines \\[0\\] but positions name \\[1\\]", lambda: short.token_generate({0: 5}, {1: 3})),
        ("line 0 holds 3 tokens: position 5 would leave a gap", lambda: short.token_generate({0: 5}, {0: 5})),
    ]
    short.context_encode(0, [5, 6, 7])
    for message, call in cases:
        with pytest.raises(DecoderInputError, match=message) as caught:
            call()
        assert "\n" not in str(caught.value)
    assert short.token_generate({}, {}) == {}
