"""Saving a compiled decoder and loading it back: same tokens, atomic writes, damaged directories refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.llm import CompiledDecoder, NeuronDecoder, compile_decoder, load
from tests.neuron_emu.llm.tiny import inputs, prompt, tiny_model


@pytest.fixture(scope="module")
def compiled() -> CompiledDecoder:
    raw, weights = inputs(tiny_model("llama", positions=32))
    return compile_decoder(raw, weights, tp_degree=2, batch_size=2, buckets=(16, 32))


def test_a_saved_decoder_loads_and_generates_the_same_tokens(compiled: CompiledDecoder, tmp_path: Path) -> None:
    target = compiled.save(tmp_path / "decoder")
    manifest = json.loads((target / "decoder.json").read_text())
    assert manifest["format"] == "neuron_emu.llm/1" and manifest["lm_head"] == "replicated"
    assert manifest["settings"]["tp_degree"] == 2 and manifest["settings"]["buckets"] == [16, 32]
    assert manifest["settings"]["compiler_args"] == "--auto-cast matmult --auto-cast-type bf16"
    assert manifest["kv_cache"] == {
        "dtype": "float32",
        "shape_per_rank": [2, 2, 1, 32, 8],
        "bytes": 2 * 2 * (2 * 2 * 1 * 32 * 8) * 4,
    }
    assert sorted(p.name for p in (target / "weights").iterdir()) == ["rank0.pt", "rank1.pt", "replicated.pt"]
    assert len(manifest["graphs"]) == 2 * 5 + 4 + 2
    loaded = load(target)
    assert isinstance(loaded, NeuronDecoder) and not isinstance(loaded, CompiledDecoder)
    assert (loaded.tp_degree, loaded.batch_size, loaded.buckets, loaded.max_length, loaded.auto_cast) == (
        2, 2, (16, 32), 32, "matmult",
    )  # fmt: skip
    assert loaded.config == compiled.config
    assert loaded.describe()["kv_cache"] == manifest["kv_cache"] and loaded.describe()["lm_head"] == "replicated"
    ids = prompt(71, 9)
    assert loaded.generate(ids, 20) == compiled.generate(ids, 20)
    loaded.close()
    with pytest.raises(ArtifactError, match="the decoder is closed"):
        loaded.generate(ids, 2)


def test_saving_replaces_a_decoder_atomically_and_leaves_nothing_behind(
    compiled: CompiledDecoder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = compiled.save(tmp_path / "decoder")
    compiled.save(target)  # over an earlier decoder: replaced
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoder"]
    original = torch.save

    def failing(obj: object, path: object, *args: object, **kwargs: object) -> None:
        if str(path).endswith("rank1.pt"):
            raise OSError("disk full")
        original(obj, path)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "save", failing)
    with pytest.raises(ArtifactError, match=r"cannot save the decoder to .*: disk full"):
        compiled.save(tmp_path / "other")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoder"]  # no half-written directory, no staging left
    with pytest.raises(ArtifactError, match=r"cannot save the decoder to .*: disk full"):
        compiled.save(target)
    assert load(target).generate([5, 6, 7], 3) == compiled.generate([5, 6, 7], 3)  # the old one is intact
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    with pytest.raises(ArtifactError, match=r"exists and is not a neuron_emu\.llm decoder directory"):
        compiled.save(tmp_path / "notes")


def test_damaged_or_missing_files_are_refused_in_one_line(compiled: CompiledDecoder, tmp_path: Path) -> None:
    target = compiled.save(tmp_path / "decoder")
    manifest = (target / "decoder.json").read_text()
    rank = target / "weights" / "rank1.pt"
    data = bytearray(rank.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rank.write_bytes(bytes(data))
    cases = [("does not match the SHA-256 its decoder.json records", target)]
    graph = target / "graphs" / "token16.attention.pt"
    with pytest.raises(ArtifactError) as first:
        load(target)
    rank.unlink()
    cases.append(("lacks weights/rank1.pt named by its decoder.json", target))
    with pytest.raises(ArtifactError) as second:
        load(target)
    graph.write_bytes(graph.read_bytes()[:-10])
    (target / "decoder.json").write_text(manifest[:-40])
    with pytest.raises(ArtifactError, match="is not readable JSON") as third:
        load(target)
    with pytest.raises(ArtifactError, match=r"has no decoder\.json: not a saved neuron_emu\.llm decoder") as fourth:
        load(tmp_path / "nowhere")
    for (message, _), caught in zip(cases, (first, second), strict=True):
        assert message in str(caught.value)
    for caught in (first, second, third, fourth):
        assert "\n" not in str(caught.value)
