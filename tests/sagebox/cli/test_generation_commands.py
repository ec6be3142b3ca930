"""`sagebox build`, `evaluate` and `quantize` on a decoder LLM: the FP32 and INT8 artifacts packaged where CDK looks,
with FP32's perplexity and INT8's gate (perplexity ratio, greedy agreement); an INT8 model that fails its gate is
refused in one line and leaves nothing behind; a rerun redoes nothing; what is not built for text generation is
refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from container.generation.decoder import Decoder
from container.generation.model import load_generation_model
from container.manifest import load_verified
from sagebox.cli.app import main
from sagebox.cli.model_options import EXIT_GATE_FAILED
from sagebox.pipeline.gate.generation_gate import measure_gate
from sagebox.pipeline.gate.perplexity import model_dir_perplexity
from sagebox.pipeline.generation_flow import NEURON_NOTE
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


def test_build_packages_fp32_and_gated_int8_and_reruns_redo_nothing(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(folder, tmp_path, "--task", "text-generation") == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert NEURON_NOTE in out
    assert "text-generation model tiny-llama (LlamaForCausalLM, license unknown)" in out
    work = tmp_path / "work"
    expected = model_dir_perplexity(work / "fp32")
    assert f"perplexity {expected.perplexity:.3f} on Sagebox's built-in held-out text" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fp32", "int8"]
    assert sorted(p.name for p in work.iterdir()) == ["fp32", "generation-report.json", "int8"]  # no staging left
    tarballs = {v: tmp_path / "out" / v / "model.tar.gz" for v in ("fp32", "int8")}
    for variant, tarball in tarballs.items():
        assert unpack_and_verify(tarball, tmp_path / "unpacked" / variant) == load_verified(work / variant)
    report = json.loads((work / "generation-report.json").read_text())
    assert report["perplexity"] == expected.summary()
    gate = report["gate"]
    assert gate["passed"] is True and gate["message"] in out and gate["message"].startswith("accuracy gate passed")
    assert (
        report["int8"]["model_dir"] == str(work / "int8")
        and report["int8"]["files"] == load_verified(work / "int8").files
    )
    # The report's figures are the serving engine's on the two directories, measured again here.
    again = measure_gate(work / "fp32", work / "int8")
    assert gate["agreement"] == again.agreement.summary() and again.agreement.positions == 16 * 32
    assert gate["perplexity"]["int8"] == again.int8.summary()
    assert gate["perplexity"]["ratio"] == pytest.approx(again.perplexity_ratio, abs=1e-5)
    stamps = {v: tarball.stat().st_mtime_ns for v, tarball in tarballs.items()}
    assert _build(folder, tmp_path) == 0  # the folder says text-generation itself
    again_out = capsys.readouterr().out
    for step in ("exporting", "measuring perplexity", "quantizing", "gating", "packaging"):
        assert step not in again_out
    assert f"perplexity {expected.perplexity:.3f}" in again_out and "accuracy gate passed" in again_out
    assert {v: tarball.stat().st_mtime_ns for v, tarball in tarballs.items()} == stamps


def test_the_int8_directory_holds_fp32s_files_with_int8_weights_and_records_its_quantization(
    folder: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    assert _build(folder, tmp_path) == 0
    fp32, int8 = load_verified(tmp_path / "work" / "fp32"), load_verified(tmp_path / "work" / "int8")
    assert (int8.variant, int8.runtime, int8.task, int8.source) == ("int8", "torch", "text-generation", fp32.source)
    assert int8.generation == fp32.generation and int8.tokenizer == fp32.tokenizer
    assert int8.quantization is not None
    fields = ("backend", "mode", "per_channel", "calibration_batches", "engine")
    assert {name: getattr(int8.quantization, name) for name in fields} == {
        "backend": "torch",
        "mode": "dynamic",
        "per_channel": True,
        "calibration_batches": 0,
        "engine": "fbgemm",
    }
    assert set(int8.files) == set(fp32.files)
    assert {n for n in int8.files if int8.files[n] != fp32.files[n]} == {"model.safetensors"}
    weights = load_file(str(tmp_path / "work" / "int8" / "model.safetensors"))
    assert weights["model.layers.0.mlp.down_proj.weight"].dtype == torch.int8
    assert weights["model.layers.0.mlp.down_proj.weight_scale"].dtype == torch.float32
    assert weights["model.norm.weight"].dtype == torch.float32
    model = load_generation_model(tmp_path / "work" / "int8", int8)
    assert isinstance(model.decoder, Decoder) and model.decoder.linear == "int8"


def _refused(err: str) -> str:
    line = _one_error_line(err)
    assert line.startswith("sagebox: error: accuracy gate FAILED: INT8 perplexity ") and line.endswith(
        "; INT8 artifact deleted"
    )
    return line


def test_an_int8_model_that_fails_its_gate_is_refused_and_leaves_fp32_alone(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(folder, tmp_path, "--max-perplexity-ratio", "0.5") == EXIT_GATE_FAILED
    captured = capsys.readouterr()
    assert "at most 0.5000)" in _refused(captured.err)
    work = tmp_path / "work"
    assert sorted(p.name for p in work.iterdir()) == ["fp32", "generation-report.json"]  # nothing half-written
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fp32"]
    assert load_verified(work / "fp32").variant == "fp32"
    report = json.loads((work / "generation-report.json").read_text())
    assert report["gate"]["passed"] is False and report["int8"]["model_dir"] is None
    # Within its limits it is built and kept.
    assert _build(folder, tmp_path) == 0
    assert "quantizing INT8" in capsys.readouterr().out
    assert (tmp_path / "out" / "int8" / "model.tar.gz").is_file() and load_verified(work / "int8").variant == "int8"
    # A rerun with a limit it cannot meet judges the measurements it has, and deletes the INT8 model and package.
    assert _build(folder, tmp_path, "--min-agreement", "1.0", "--max-perplexity-ratio", "0.9") == EXIT_GATE_FAILED
    captured = capsys.readouterr()
    assert "at least 1.000" in _refused(captured.err) and "gating" not in captured.out
    assert not (work / "int8").exists() and not (tmp_path / "out" / "int8").exists()
    assert (tmp_path / "out" / "fp32" / "model.tar.gz").is_file()
    assert _build(folder, tmp_path, "--min-agreement", "1.5") == 1
    assert "--min-agreement must be between 0 and 1" in _one_error_line(capsys.readouterr().err)


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


def test_evaluate_of_a_build_compares_its_variants(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(folder, tmp_path) == 0
    report = json.loads((tmp_path / "work" / "generation-report.json").read_text())
    capsys.readouterr()
    assert main(["evaluate", "--model-dir", str(tmp_path / "work"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["perplexity"] == report["gate"]["perplexity"] and printed["agreement"] == report["gate"]["agreement"]
    assert printed["passed"] is True and printed["limits"] == {"max_perplexity_ratio": 1.05, "min_agreement": 0.25}
    int8 = load_verified(tmp_path / "work" / "int8")
    assert main(["evaluate", "--model-dir", str(tmp_path / "work" / "int8"), "--json"]) == 0  # one variant alone
    alone = json.loads(capsys.readouterr().out)
    assert (alone["variant"], alone["perplexity"]) == ("int8", printed["perplexity"]["int8"]["perplexity"])
    assert int8.variant == "int8"
    assert main(["evaluate", "--model-dir", str(tmp_path / "work")]) == 0
    table = capsys.readouterr().out
    fp32_ppl, int8_ppl = (printed["perplexity"][v]["perplexity"] for v in ("fp32", "int8"))
    assert re.search(rf"int8\s*│\s*{int8_ppl:.3f}\s*│\s*{printed['perplexity']['ratio']:.4f}\s*│", table), table
    assert re.search(rf"fp32\s*│\s*{fp32_ppl:.3f}\s*│", table), table


def test_what_is_not_built_for_text_generation_yet_is_one_line(
    folder: Path, tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["quantize", "--model", str(folder), "--out", str(tmp_path / "q")]) == 1
    assert "`sagebox quantize` does not take decoder LLMs" in _one_error_line(capsys.readouterr().err)
    assert _build(folder, tmp_path, "--task", "token-classification") == 1
    assert "built for text-generation only" in _one_error_line(capsys.readouterr().err)
    assert main(["evaluate", "--model-dir", str(tiny_model_dir)]) == 1
    assert "--data is required to evaluate a question-answering model" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "q").exists() and not (tmp_path / "out").exists()
