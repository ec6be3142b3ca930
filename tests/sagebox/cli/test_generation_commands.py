"""`sagebox build`, `evaluate` and `quantize` on a decoder LLM: the FP32 artifact packaged where CDK looks, with its
perplexity; a rerun redoes nothing; what is not built for text generation yet is refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from container.manifest import load_verified
from sagebox.cli.app import main
from sagebox.pipeline.build_all import FP32_ONLY
from sagebox.pipeline.gate.perplexity import model_dir_perplexity
from sagebox.pipeline.package.tarball import unpack_and_verify
from tests.causal_models import causal_folder, tiny_tokenizer, write_llama_gguf
from tests.container.generation.tiny_decoders import tiny_decoder


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return causal_folder(tmp_path_factory.mktemp("cli-generation") / "tiny-llama", "llama")


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sagebox:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _build(model: Path, root: Path, *extra: str) -> int:
    return main(["build", "--model", str(model), *extra, "--work", str(root / "work"), "--out", str(root / "out")])


def test_build_packages_the_fp32_model_with_its_perplexity_and_reruns_redo_nothing(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(folder, tmp_path, "--task", "text-generation") == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert FP32_ONLY in out
    assert "text-generation model tiny-llama (LlamaForCausalLM, license unknown)" in out
    work = tmp_path / "work" / "fp32"
    expected = model_dir_perplexity(work)
    assert f"perplexity {expected.perplexity:.3f} on Sagebox's built-in held-out text" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fp32"]
    tarball = tmp_path / "out" / "fp32" / "model.tar.gz"
    assert unpack_and_verify(tarball, tmp_path / "unpacked") == load_verified(work)
    report = json.loads((tmp_path / "work" / "generation-report.json").read_text())
    assert report["perplexity"] == expected.summary()
    stamp = tarball.stat().st_mtime_ns
    assert _build(folder, tmp_path) == 0  # the folder says text-generation itself
    again = capsys.readouterr().out
    assert "exporting" not in again and "measuring perplexity" not in again and "packaging" not in again
    assert f"perplexity {expected.perplexity:.3f}" in again
    assert tarball.stat().st_mtime_ns == stamp


def test_build_from_a_gguf_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gguf = write_llama_gguf(tmp_path / "tiny.gguf", tiny_decoder("llama"), tiny_tokenizer())
    assert _build(gguf, tmp_path) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "text-generation model tiny.gguf (LlamaForCausalLM" in out
    manifest = unpack_and_verify(tmp_path / "out" / "fp32" / "model.tar.gz", tmp_path / "unpacked")
    assert (manifest.task, manifest.source.name) == ("text-generation", "tiny.gguf")


def test_evaluate_prints_the_perplexity_of_a_text_generation_model(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sagebox.pipeline.export.generation import build_generation

    model_dir = tmp_path / "fp32"
    build_generation(folder, model_dir)
    assert main(["evaluate", "--model-dir", str(model_dir), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["perplexity"] == round(model_dir_perplexity(model_dir).perplexity, 4)
    assert (printed["variant"], printed["runtime"], printed["examples"]) == ("fp32", "torch", 6)
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sat on the mat.\n\na dog ran in the park.\n")
    assert main(["evaluate", "--model-dir", str(model_dir), "--data", str(texts)]) == 0
    table = capsys.readouterr().out
    own = model_dir_perplexity(model_dir, ["the cat sat on the mat.", "a dog ran in the park."])
    assert re.search(rf"fp32\s*│\s*torch\s*│\s*{own.perplexity:.2f}\s*│\s*2\s*│", table), table


def test_what_is_not_built_for_text_generation_yet_is_one_line(
    folder: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["quantize", "--model", str(folder), "--out", str(tmp_path / "q")]) == 1
    assert "INT8 text-generation models are not built yet" in _one_error_line(capsys.readouterr().err)
    assert _build(folder, tmp_path, "--task", "token-classification") == 1
    assert "built for text-generation only" in _one_error_line(capsys.readouterr().err)
    assert main(["evaluate", "--model-dir", str(tiny_model_dir)]) == 1
    assert "--data is required to evaluate a question-answering model" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "q").exists() and not (tmp_path / "out").exists()
