"""The engine's forward pass equals transformers' for every family, alone and in a ragged batch."""

from __future__ import annotations

import pytest
import torch

from container.generation.decoder import Decoder, KVCache, Segment
from neuron_emu.llm.config import DecoderConfig, UnsupportedModel, read_config
from tests.container.generation.tiny_decoders import VOCAB, engine_inputs, tiny_decoder

KINDS = ("llama", "qwen2", "gpt2", "opt", "opt-proj", "opt-post")


def _engine(kind: str) -> tuple[object, Decoder]:
    model = tiny_decoder(kind)
    raw, weights = engine_inputs(model)
    return model, Decoder(read_config(raw), weights)


def _prompt(seed: int, length: int) -> torch.Tensor:
    return torch.randint(3, VOCAB, (length,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", KINDS)
def test_prefill_logits_at_every_position_equal_transformers(kind: str) -> None:
    model, decoder = _engine(kind)
    tokens = _prompt(1, 37)
    cache = KVCache(decoder.config, slots=2, max_len=64)
    ours = decoder.forward(tokens, [Segment(1, 0, 37)], cache, logits_rows=torch.arange(37))
    with torch.no_grad():
        theirs = model(tokens[None]).logits[0]  # type: ignore[operator]
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_greedy_decoding_in_chunks_and_in_a_ragged_batch_equals_transformers(kind: str) -> None:
    model, decoder = _engine(kind)
    prompts = [_prompt(seed, length) for seed, length in ((2, 5), (3, 23), (4, 1), (5, 40))]
    with torch.no_grad():
        reference = [
            model.generate(  # type: ignore[attr-defined]
                p[None], max_new_tokens=12, do_sample=False, eos_token_id=None, attention_mask=torch.ones(1, len(p))
            )[0, len(p) :].tolist()
            for p in prompts
        ]
    cache = KVCache(decoder.config, slots=4, max_len=64)
    generated: list[list[int]] = [[] for _ in prompts]
    # Step 1: sequence 0 prefilled whole, sequence 1 in a first chunk of 16; step 2: sequence 1's rest beside
    # sequence 0's first decode; then every sequence joins as its prompt is in, decoding side by side.
    pending = {i: p.tolist() for i, p in enumerate(prompts)}
    done = {i: 0 for i in range(len(prompts))}
    joins = {0: 0, 1: 0, 2: 2, 3: 3}
    for step in range(40):
        tokens: list[int] = []
        segments: list[Segment] = []
        owners: list[int] = []
        for i in range(len(prompts)):
            if joins[i] > step or len(generated[i]) >= 12:
                continue
            if pending[i]:
                chunk = pending[i][:16]
                pending[i] = pending[i][16:]
                segments.append(Segment(i, done[i], len(chunk)))
                tokens += chunk
                done[i] += len(chunk)
                if pending[i]:
                    owners.append(-1)
                    continue
            else:
                segments.append(Segment(i, done[i], 1))
                tokens.append(generated[i][-1])
                done[i] += 1
            owners.append(i)
        if not segments:
            break
        logits = decoder.forward(torch.tensor(tokens), segments, cache)
        for row, owner in enumerate(owners):
            if owner >= 0:
                generated[owner].append(int(torch.argmax(logits[row])))
    assert generated == reference


def test_configs_the_engine_cannot_run_are_refused_with_the_reason() -> None:
    with pytest.raises(UnsupportedModel, match="model_type 'bert' is not a supported decoder"):
        read_config({"model_type": "bert"})
    with pytest.raises(UnsupportedModel, match="rope type 'llama3'"):
        read_config(
            {"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
             "vocab_size": 10, "intermediate_size": 8, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
        )  # fmt: skip
    with pytest.raises(UnsupportedModel, match="no 'intermediate_size'"):
        read_config({"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1,
                     "vocab_size": 10})  # fmt: skip


def test_sliding_window_caps_the_context_and_kv_bytes_follow_the_shape() -> None:
    raw = tiny_decoder("llama").config.to_dict()
    config = read_config({**raw, "model_type": "mistral", "sliding_window": 128})
    assert isinstance(config, DecoderConfig) and config.max_positions == 128 and config.kv_heads == 2
    assert config.kv_bytes_per_token == 2 * 3 * 2 * 8 * 4


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("linear", ["fp32", "int8"])
def test_a_lone_decoding_step_through_the_scripted_layers_equals_the_python_layers(kind: str, linear: str) -> None:
    model = tiny_decoder(kind)
    raw, weights = engine_inputs(model)
    scripted, plain = (
        Decoder(read_config(raw), weights, linear=linear),
        Decoder(read_config(raw), weights, linear=linear),
    )
    assert scripted._scripted is not None
    plain._scripted = None
    prompt = _prompt(11, 9)
    logits = []
    for decoder in (scripted, plain):
        cache = KVCache(decoder.config, slots=3, max_len=32)
        decoder.forward(prompt, [Segment(2, 0, 9)], cache)
        steps = [decoder.forward(torch.tensor([5 + i]), [Segment(2, 9 + i, 1)], cache) for i in range(4)]
        logits.append((torch.cat(steps), cache.keys[:, 2, :, :13].clone()))
    torch.testing.assert_close(logits[0][0], logits[1][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[0][1], logits[1][1])  # the scripted layers wrote the same keys to the slot


def test_families_outside_llamas_layout_keep_the_python_layers() -> None:
    raw, weights = engine_inputs(tiny_decoder("gpt2"))
    assert Decoder(read_config(raw), weights)._scripted is None


@pytest.mark.parametrize("linear", ["fp32", "int8"])
def test_decoding_steps_of_several_sequences_through_the_scripted_layers_equal_the_python_layers(linear: str) -> None:
    raw, weights = engine_inputs(tiny_decoder("llama"))
    scripted, plain = (
        Decoder(read_config(raw), weights, linear=linear),
        Decoder(read_config(raw), weights, linear=linear),
    )
    plain._scripted = None
    results = []
    for decoder in (scripted, plain):
        cache = KVCache(decoder.config, slots=4, max_len=32)
        for slot, length in ((0, 5), (3, 9)):  # slots 0 and 3 in use, 1 and 2 idle: masked out
            decoder.forward(_prompt(slot, length), [Segment(slot, 0, length)], cache)
        steps = [
            decoder.forward(torch.tensor([7 + i, 9 + i]), [Segment(3, 9 + i, 1), Segment(0, 5 + i, 1)], cache)
            for i in range(3)
        ]
        results.append((torch.cat(steps), cache.keys.clone()))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(results[0][1], results[1][1])
