"""`build_neuron`: a servable Neuron model directory from a HF folder, answering like the CPU model."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.manifest import load_verified
from container.predictor import Predictor
from sagebox.errors import SageboxError
from sagebox.pipeline.compile import build_neuron


@pytest.mark.slow
def test_neuron_model_dir_serves_the_same_answers_as_fp32(
    tiny_hf_folder: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "neuron"
    manifest = build_neuron(tiny_hf_folder, out)
    assert manifest.variant == "neuron" and manifest.runtime == "neuron"
    assert manifest.compile is not None and manifest.compile.auto_cast == "matmult"
    assert "neuron_cost_plan.json" in manifest.files
    assert load_verified(out) == manifest
    neuron = Predictor.load(out)
    fp32 = Predictor.load(tiny_model_dir)
    pairs = [
        ("Which basin?", "The Amazon rainforest covers most of the Amazon basin of South America."),
        ("Who met Bob?", "Alice met Bob in Paris."),
    ]
    for (_question, context), a, b in zip(pairs, neuron.answer_many(pairs), fp32.answer_many(pairs), strict=True):
        assert context[a.start : a.end] == a.text
        assert a.score == pytest.approx(b.score, abs=0.05)  # bf16 matmuls move probabilities a little


def test_bad_folder_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="does not exist"):
        build_neuron(tmp_path / "missing", tmp_path / "out")
    assert not (tmp_path / "out").exists()
