"""Batch lines generating together get the tokens each gets alone; the KV cache stays on the ranks, updated in place."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.llm import compile_decoder
from neuron_emu.runtime import describe
from tests.neuron_emu.llm.tiny import inputs, prompt, tiny_model


def test_lines_generating_together_get_the_tokens_each_gets_alone() -> None:
    model = tiny_model("llama", positions=64)
    raw, weights = inputs(model)
    decoder = compile_decoder(raw, weights, tp_degree=2, batch_size=4, buckets=(32, 64))  # bf16 auto-cast
    prompts = {0: prompt(41, 5), 1: prompt(42, 12), 2: prompt(43, 3), 3: prompt(44, 20)}
    late = prompt(45, 7)  # joins on line 2 once that line is done
    budget = {0: 20, 1: 16, 2: 6, 3: 24}
    alone = {line: decoder.generate(ids, budget[line]) for line, ids in prompts.items()}
    alone_late = decoder.generate(late, 10)

    together: dict[int, list[int]] = {}
    lengths: dict[int, int] = {}
    joins = {0: 0, 1: 0, 2: 1, 3: 3}  # the step each line's prompt is encoded before
    replaced = False
    for step in range(40):
        for line, at in joins.items():
            if at == step:
                lengths[line] = len(prompts[line])
                together[line] = [int(decoder.context_encode(line, prompts[line]).argmax())]
        if not replaced and len(together.get(2, [])) == budget[2]:  # line 2 finished: a new prompt takes it
            finished, replaced = together.pop(2), True
            prompts[2], budget[2], lengths[2] = late, 10, len(late)
            together[2] = [int(decoder.context_encode(2, late).argmax())]
        active = {line: tokens for line, tokens in together.items() if len(tokens) < budget[line]}
        if not active:
            break
        logits = decoder.token_generate(
            {line: tokens[-1] for line, tokens in active.items()}, {line: lengths[line] for line in active}
        )
        for line, row in logits.items():
            together[line].append(int(row.argmax()))
            lengths[line] += 1
    assert replaced and finished == alone[2]
    assert together[2] == alone_late
    assert {line: together[line] for line in (0, 1, 3)} == {line: alone[line] for line in (0, 1, 3)}


def test_the_cache_is_per_rank_in_the_model_dtype_and_updated_in_place() -> None:
    model = tiny_model("llama", positions=32)
    raw, weights = inputs(model)
    decoder = compile_decoder(raw, weights, tp_degree=8, batch_size=2, max_length=32, auto_cast="none")
    # 2 key/value heads over 8 ranks: each rank holds one (replicated to 4 ranks), [layers, batch, 1, 32, 8].
    assert len(decoder.caches) == 8
    assert all(c.keys.shape == (2, 2, 1, 32, 8) and c.keys.dtype == torch.float32 for c in decoder.caches)
    assert decoder.kv_cache_bytes == 8 * 2 * (2 * 2 * 1 * 32 * 8) * 4
    keys = decoder.caches[5].keys
    pointer = keys.data_ptr()
    decoder.context_encode(1, prompt(51, 6))  # writes the whole 32 bucket of line 1 (the padding's too)
    assert keys[:, 1].abs().sum() > 0 and keys[:, 0].abs().sum() == 0  # line 0 untouched
    before = keys.clone()
    decoder.token_generate({1: 7}, {1: 6})
    assert decoder.caches[5].keys is keys and keys.data_ptr() == pointer
    changed = (keys != before).any(dim=-1).nonzero()[:, [1, 3]].unique(dim=0)  # (line, position) pairs
    assert changed.tolist() == [[1, 6]]
    assert torch.equal(decoder.caches[4].keys, keys)  # ranks 4..7 hold the same key/value head
    assert describe(decoder.graphs.token[32].attention)["auto_cast"] == "none"


def test_bf16_weights_give_a_bf16_cache(tmp_path: Path) -> None:
    model = tiny_model("gpt2", positions=32).to(torch.bfloat16)
    decoder = compile_decoder(model.config, dict(model.state_dict()), max_length=32)  # a PretrainedConfig will do
    assert decoder.caches[0].keys.dtype == torch.bfloat16 and decoder.settings.cache_dtype == "bfloat16"
    assert describe(decoder.graphs.context[32].attention)["auto_cast"] == "matmult"
    tokens = decoder.generate(prompt(52, 5), 8)
    assert len(tokens) == 8 and decoder.caches[0].keys.abs().sum() > 0
    assert decoder.kv_cache_bytes == 2 * (2 * 1 * 8 * 32 * 8) * 2  # K and V, [2, 1, 8, 32, 8] in 2-byte bf16
    decoder.close()
    with pytest.raises(ArtifactError, match="the decoder is closed"):
        decoder.save(tmp_path / "closed")
