"""INT8 decoder weights as an artifact holds them: int8 values with a float32 scale per output channel that
broadcasts over the weight in its own layout (GPT-2's Conv1D keeps [in, out]), dequantized within half a step and
quantized back to the same integers; and the decoder built from them stays close to FP32 (logits, greedy tokens)."""

from __future__ import annotations

import pytest
import torch

from container.generation.decoder import Decoder, KVCache, Segment
from container.generation.quantized import SCALE_SUFFIX, dequantize, is_quantized, quantize_weights, quantized_names
from neuron_emu.llm.config import read_config
from tests.container.generation.tiny_decoders import VOCAB, engine_inputs, tiny_decoder


def _quantized(kind: str) -> tuple[object, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    raw, weights = engine_inputs(tiny_decoder(kind))
    config = read_config(raw)
    return config, weights, quantize_weights(config, weights)


@pytest.mark.parametrize("kind", ["llama", "gpt2", "opt-proj"])
def test_every_matrix_is_int8_with_a_scale_per_output_channel_and_the_rest_is_kept(kind: str) -> None:
    config, weights, stored = _quantized(kind)
    names = quantized_names(config, weights)  # type: ignore[arg-type]
    assert names and is_quantized(stored) and not is_quantized(weights)
    for name, tensor in weights.items():
        if name in names:
            q, scale = stored[name], stored[name + SCALE_SUFFIX]
            assert q.dtype == torch.int8 and q.shape == tensor.shape and scale.dtype == torch.float32
            assert int(q.abs().max()) == 127 and int(q.min()) >= -127
        else:
            assert torch.equal(stored[name], tensor) and name + SCALE_SUFFIX not in stored
    assert not any("norm" in name or name.endswith(".bias") for name in names)
    assert any("embed" in name or "wte" in name for name in names)  # the embeddings (a tied output layer) too


def test_a_linear_weight_scales_its_rows_and_a_conv1d_weight_its_columns() -> None:
    _, llama, llama_q = _quantized("llama")
    name = "model.layers.0.mlp.down_proj.weight"
    out_features = llama[name].shape[0]
    assert llama_q[name + SCALE_SUFFIX].shape == (out_features, 1)
    _, gpt2, gpt2_q = _quantized("gpt2")
    conv = "transformer.h.0.attn.c_attn.weight"  # Conv1D: [in, out] = [48, 3 x 48]
    assert gpt2[conv].shape == (48, 144) and gpt2_q[conv + SCALE_SUFFIX].shape == (1, 144)
    torch.testing.assert_close(gpt2_q[conv + SCALE_SUFFIX][0], gpt2[conv].abs().amax(dim=0) / 127)
    assert int(gpt2_q[conv].abs().amax(dim=0).min()) == 127  # every output column reaches 127
    assert gpt2_q["transformer.wte.weight" + SCALE_SUFFIX].shape == (VOCAB, 1)  # an embedding: per token row


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_dequantized_weights_are_within_half_a_step_and_quantize_back_to_the_same_integers(kind: str) -> None:
    config, weights, stored = _quantized(kind)
    restored = dequantize(stored)
    assert set(restored) == set(weights)
    for name, tensor in weights.items():
        scale = stored.get(name + SCALE_SUFFIX)
        if scale is None:
            assert torch.equal(restored[name], tensor)
            continue
        assert restored[name].dtype == torch.float32
        assert bool(((restored[name] - tensor).abs() <= scale / 2 + 1e-7).all())
    again = quantize_weights(config, restored)  # type: ignore[arg-type]
    assert all(torch.equal(again[name], stored[name]) for name in stored if stored[name].dtype == torch.int8)


def test_a_scale_beside_a_weight_that_is_not_int8_is_refused() -> None:
    with pytest.raises(ValueError, match="has a scale"):
        dequantize({"w.weight": torch.ones(2, 2), "w.weight" + SCALE_SUFFIX: torch.ones(2, 1)})


@pytest.mark.parametrize("kind", ["llama", "qwen2", "gpt2", "opt-proj"])
def test_the_int8_decoder_stays_close_to_fp32_and_mostly_picks_its_greedy_tokens(kind: str) -> None:
    config, weights, stored = _quantized(kind)
    fp32, int8 = Decoder(config, weights), Decoder(config, stored, linear="int8")  # type: ignore[arg-type]
    tokens = torch.randint(3, VOCAB, (40,), generator=torch.Generator().manual_seed(7))
    logits = [
        d.forward(tokens, [Segment(0, 0, 40)], KVCache(d.config, 1, 40), logits_rows=torch.arange(40))
        for d in (fp32, int8)
    ]
    error = float((logits[1] - logits[0]).norm() / logits[0].norm())
    assert 0 < error < 0.05  # INT8 is not FP32, and not far from it
    assert float((logits[1].argmax(-1) == logits[0].argmax(-1)).float().mean()) >= 0.9

    def greedy(decoder: Decoder, prompt: torch.Tensor, new: int = 16) -> list[int]:
        cache = KVCache(decoder.config, 1, len(prompt) + new)
        token = decoder.forward(prompt, [Segment(0, 0, len(prompt))], cache).argmax(-1)
        out = [int(token)]
        for step in range(1, new):
            token = decoder.forward(token, [Segment(0, len(prompt) + step - 1, 1)], cache).argmax(-1)
            out.append(int(token))
        return out

    equal = total = 0
    for seed in range(4):
        prompt = torch.randint(3, VOCAB, (12,), generator=torch.Generator().manual_seed(seed))
        a, b = greedy(fp32, prompt), greedy(int8, prompt)
        equal, total = equal + sum(x == y for x, y in zip(a, b, strict=True)), total + len(a)
    assert equal / total >= 0.6
