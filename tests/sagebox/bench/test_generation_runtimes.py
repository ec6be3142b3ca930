"""The runtime comparison on a tiny random Llama: every candidate that runs here computes what the engine computes
(the same logits after the same prompts, and after one more token each), so their times compare the same work; the
rounds interleave them and keep what they measured; a candidate that cannot run, or fails, says why in one line.
torch.compile (tens of seconds to compile) and onnxruntime-genai (another interpreter, a model build) are left out."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from container.generation.decoder import Decoder
from neuron_emu.llm.config import read_config
from sagebox.bench import generation_runtimes as rt
from tests.container.generation.tiny_decoders import VOCAB, engine_inputs, tiny_decoder

BATCH, LENGTH = 3, 20


@pytest.fixture(scope="module")
def runners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[rt.Runner]]:
    model = tiny_decoder("llama")
    raw, weights = engine_inputs(model)
    decoder = Decoder(read_config(raw), weights)
    made: list[rt.Runner] = [
        rt.SageboxRunner(decoder, scripted=True),
        rt.SageboxRunner(decoder, scripted=False),
        rt.TransformersStaticRunner(model),
        rt.GenerateRunner(model),
        # The TorchScript exporter: seconds, where the dynamo one the benchmark tries first takes tens.
        rt.OnnxRuntimeRunner(model, tmp_path_factory.mktemp("onnx"), exporters=("torchscript",)),
    ]
    for runner in made:
        runner.set_threads(1)
    yield made
    for runner in made:
        runner.close()


def test_every_candidate_gives_the_engines_logits_after_a_prompt_and_after_one_more_token(
    runners: list[rt.Runner],
) -> None:
    prompts = rt.prompts_for(VOCAB, BATCH, LENGTH, seed=3)
    engine = runners[0]
    first = engine.fill(prompts)
    follow = first.argmax(-1)  # greedy: what generate() chooses itself
    expected = engine.check(prompts, follow)
    assert expected[0].shape == expected[1].shape == (BATCH, VOCAB)
    for runner in runners:
        after_prompt, after_token = runner.check(prompts, follow)
        for got, want in zip((after_prompt, after_token), expected, strict=True):
            assert got.shape == want.shape, runner.name
            torch.testing.assert_close(got.float(), want, atol=1e-4, rtol=1e-4, msg=runner.name)
            assert torch.equal(got.argmax(-1), want.argmax(-1)), runner.name
    # A scripted step and an eager step of the engine really took different paths over the same decoder.
    assert runners[0].decoder._scripted is not None  # type: ignore[attr-defined]


def test_rounds_interleave_every_candidate_and_keep_each_shapes_samples(runners: list[rt.Runner]) -> None:
    calls: list[str] = []

    class Spy(rt.Runner):
        """Records the order of the steps, and fails at its third step."""

        name = "spy"

        def __init__(self) -> None:
            super().__init__()
            self.steps = 0

        def fill(self, prompts: torch.Tensor) -> torch.Tensor:
            return torch.empty(0)

        def step(self, batch: int) -> float:
            self.steps += 1
            calls.append(f"spy{batch}")
            if self.steps == 3:
                raise RuntimeError("out of cache\nsecond line")
            return 1.0

        def prefill(self, prompt: torch.Tensor) -> float:
            return 2.0

    spy = Spy()
    results = {r.name: rt.CandidateResult(r.name, r.name) for r in [*runners, spy]}
    rt.run_rounds([*runners, spy], results, VOCAB, batches=(1, 2), rounds=2, threads=1, context=12,
                  prefill_tokens=8, warmup=1)  # fmt: skip
    for runner in runners:
        result = results[runner.name]
        assert not result.failures, result.failures
        for batch in (1, 2) if runner.batches is None else runner.batches:
            measured = result.decode[1][batch]
            assert len(measured.samples_ms) == 2 and measured.first_ms is not None
            assert measured.median_ms is not None and measured.median_ms > 0
        assert len(result.prefill[1].samples_ms) == 2
        # Every candidate's logits after the prompts were compared with the first's: the same greedy tokens.
        assert result.same_greedy is True and result.max_logit_diff is not None and result.max_logit_diff < 1e-4
    # The spy warmed up at each batch (2 steps), then failed at its first round's step, and was called no more.
    assert results["spy"].failures == {"threads 1, batch 1": "RuntimeError: out of cache"}
    assert calls == ["spy1", "spy2", "spy1"]
    assert results["spy"].decode[1][1].samples_ms == []


def test_a_candidate_that_cannot_run_is_skipped_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime_genai", None)  # as if not installed: importing it fails
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    made = rt.make_runners(tmp_path, ["onnxruntime-genai", "sagebox"], work=tmp_path / "work")
    assert made.runners == []
    assert made.skipped["onnxruntime-genai"] == (
        "onnxruntime_genai is not importable here and no --genai-python was given"
    )
    assert made.skipped["sagebox"].startswith("UnsupportedModel: ")  # the config names no model type
    assert "\n" not in made.skipped["sagebox"]
    with pytest.raises(ValueError, match="unknown candidates"):
        rt.make_runners(tmp_path, ["tensorrt"])

    results = rt.Results(str(tmp_path), 200, 128, [1, 16], [2], 3, [
        rt.CandidateResult(name, rt.DESCRIPTIONS[name], skipped=why) for name, why in made.skipped.items()
    ])  # fmt: skip
    report: dict[str, Any] = json.loads(json.dumps(results.to_json()))
    assert report["candidates"][0]["skipped"] == made.skipped["onnxruntime-genai"]
    assert f"onnxruntime-genai  -  skipped: {made.skipped['onnxruntime-genai']}" in rt.table(results)
