"""`sagebox compile --model-dir` on a text-generation directory: the neuron artifact written, with what it was
compiled for; bad input exits 1 with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.manifest import load_verified
from sagebox.cli.app import main
from tests.container.generation.model_dir import write_model_dir


@pytest.fixture(scope="module")
def fp32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("cli-compile-gen") / "fp32", "llama", context=64)


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sagebox:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_compile_writes_the_neuron_text_generation_model(
    fp32_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "neuron"
    args = ["--batch-size", "3", "--auto-cast", "none", "--target", "trn1", "--max-length", "48"]
    assert main(["compile", "--model-dir", str(fp32_dir), "--out", str(out), *args]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "text-generation neuron model (neuron-emu), tensor parallel 1, batch 3, max length 48" in printed
    assert "auto-cast none (FP32)" in printed and "greedy next tokens agree" in printed
    manifest = load_verified(out)
    assert manifest.compile is not None and manifest.compile.batch_size == 3
    assert all("trn1" in t for t in manifest.compile.target_instances)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--model", "x"], "give --model (a Hugging Face encoder) or --model-dir"),
        (["--max-length", "1"], "--max-length must be at least 2"),
        (["--auto-cast", "none", "--compiler-args", "--auto-cast none"], "not both"),
        (["--compiler-args", "--auto-cast sometimes"], "--compiler-args: --auto-cast 'sometimes' is not one of"),
        (["--backend", "torch-neuronx"], "does not compile text-generation models here"),
        (["--tensor-parallel", "4"], "Neuron compilation of the decoder failed"),
        (["--task", "question-answering"], "--model-dir compiles a text-generation model"),
    ],
)
def test_bad_input_exits_1_with_one_line(
    fp32_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    assert main(["compile", "--model-dir", str(fp32_dir), "--out", str(tmp_path / "out"), *args]) == 1
    assert fragment in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_a_directory_that_is_not_text_generation_or_a_model_folder_that_is(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compile", "--out", str(tmp_path / "a")]) == 1
    assert "give --model (a Hugging Face encoder) or --model-dir" in _one_error_line(capsys.readouterr().err)
    assert main(["compile", "--model-dir", str(tiny_model_dir), "--out", str(tmp_path / "a")]) == 1
    assert "holds a question-answering model" in _one_error_line(capsys.readouterr().err)
    from tests.causal_models import causal_folder

    folder = causal_folder(tmp_path / "llm", "llama")
    assert main(["compile", "--model", str(folder), "--out", str(tmp_path / "b")]) == 1
    assert "is a text-generation model: build it first" in _one_error_line(capsys.readouterr().err)
    assert main(["compile", "--model", str(folder), "--out", str(tmp_path / "c"), "--max-length", "64"]) == 1
    assert "--max-length is for a text-generation model" in _one_error_line(capsys.readouterr().err)
