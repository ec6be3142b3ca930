"""Compiling a text-generation directory for NeuronCores: sharded over two emulated cores it still computes the CPU
engine's logits (auto-cast none, checked before the directory is swapped in); with bf16 auto-cast the difference is
measured and reported; what cannot be compiled is one line and leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from container.manifest import load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.compile.generation import NXDI_UNSUPPORTED, DecoderCompile, compile_generation
from tests.container.generation.model_dir import write_model_dir


@pytest.fixture(scope="module")
def fp32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("compile-gen") / "fp32", "llama", context=128)


def test_two_cores_compute_the_cpu_engines_logits_and_bf16_is_measured(fp32_dir: Path, tmp_path: Path) -> None:
    said: list[str] = []
    manifest, check = compile_generation(
        fp32_dir, tmp_path / "tp2", DecoderCompile(tensor_parallel=2, batch_size=2, auto_cast="none"), say=said.append
    )
    assert manifest.compile is not None and (manifest.compile.tensor_parallel, manifest.compile.batch_size) == (2, 2)
    assert load_verified(tmp_path / "tp2") == manifest and manifest.sequence_buckets == [128]
    assert check.context_difference < 1e-3 and check.token_difference < 1e-3 and check.same_next_token
    assert any("largest logit difference" in line for line in said)
    _, rounded = compile_generation(fp32_dir, tmp_path / "bf16", DecoderCompile(target="inf2", max_length=64))
    assert 0 < rounded.context_difference < 1.0  # bf16 rounding, reported rather than gated
    bf16 = load_verified(tmp_path / "bf16")
    assert bf16.compile is not None and (bf16.compile.auto_cast, bf16.compile.auto_cast_type) == ("matmult", "bf16")
    assert bf16.tokenizer.max_length == 64 and bf16.sequence_buckets == [64]
    assert bf16.compile.target_instances and all("inf2" in t for t in bf16.compile.target_instances)


@pytest.mark.parametrize(
    ("options", "backend", "fragment"),
    [
        (DecoderCompile(tensor_parallel=4), "neuron_emu", "Neuron compilation of the decoder failed"),
        (DecoderCompile(max_length=4096), "neuron_emu", "--max-length 4096 exceeds the model's context of 128"),
        (DecoderCompile(auto_cast="all"), "neuron_emu", "a decoder compiles with none or matmult"),
        (DecoderCompile(), "torch_neuronx", NXDI_UNSUPPORTED),
    ],
)
def test_what_cannot_be_compiled_is_one_line_and_writes_nothing(
    fp32_dir: Path, tmp_path: Path, options: DecoderCompile, backend: str, fragment: str
) -> None:
    with pytest.raises(SageboxError) as err:
        compile_generation(fp32_dir, tmp_path / "out", options, backend=backend)  # type: ignore[arg-type]
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_only_an_fp32_text_generation_directory_is_compiled(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="holds a question-answering model on the torchscript runtime"):
        compile_generation(tiny_model_dir, tmp_path / "out")
    with pytest.raises(SageboxError, match=r"--model-dir: model directory .* does not exist"):
        compile_generation(tmp_path / "nothing", tmp_path / "out")


def test_an_int8_text_generation_directory_is_not_compiled(fp32_dir: Path, tmp_path: Path) -> None:
    from sagebox.pipeline.quantize.generation import build_generation_int8

    build_generation_int8(fp32_dir, tmp_path / "int8")
    with pytest.raises(SageboxError, match="holds the int8 variant; compile the FP32 text-generation directory"):
        compile_generation(tmp_path / "int8", tmp_path / "out")
    assert not (tmp_path / "out").exists()
