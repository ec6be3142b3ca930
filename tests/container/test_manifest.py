"""Manifest schema and on-disk verification."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from container.manifest import CompileSpec, ManifestError, load_verified, parse, unlisted_files
from container.record import ValidationError


def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


def edit_manifest(model_dir: Path, **changes: object) -> None:
    path = model_dir / "manifest.json"
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


def test_built_model_verifies_and_lists_every_file(tiny_model_dir: Path) -> None:
    manifest = load_verified(tiny_model_dir)
    assert set(manifest.files) == {"model.pt", "tokenizer.json"}
    assert manifest.variant == "fp32" and manifest.runtime == "torchscript"
    assert parse(manifest.to_json()) == manifest


def test_tampered_file_is_named(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    with (model_dir / "tokenizer.json").open("a") as fh:
        fh.write(" ")
    with pytest.raises(ManifestError, match=r"tampered: sha256 mismatch for tokenizer\.json"):
        load_verified(model_dir)


def test_missing_file_is_named(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    (model_dir / "model.pt").unlink()
    with pytest.raises(ManifestError, match=r"incomplete: model\.pt missing"):
        load_verified(model_dir)


def test_missing_or_broken_manifest(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    (model_dir / "manifest.json").write_text("{not json")
    with pytest.raises(ManifestError, match="invalid"):
        load_verified(model_dir)
    (model_dir / "manifest.json").unlink()
    with pytest.raises(ManifestError, match="missing"):
        load_verified(model_dir)
    with pytest.raises(ManifestError, match="does not exist"):
        load_verified(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"files": {"../etc/passwd": "0" * 64, "model.pt": "0" * 64, "tokenizer.json": "0" * 64}}, "plain relative"),
        ({"sequence_buckets": [128, 64]}, "strictly increasing"),
        ({"sequence_buckets": [64, 1024]}, "exceeds the tokenizer"),
        ({"variant": "int8"}, "quantization"),
        ({"variant": "neuron"}, "neuron"),
        ({"model_file": "other.pt"}, "not listed"),
        ({"surprise": 1}, "Extra inputs"),
        ({"task": "summarization"}, "task"),
        ({"task": "text-classification"}, "must record its labels"),
        ({"task": "text-classification", "labels": ["a", "b"]}, "problem_type is recorded for"),
        ({"task": "token-classification", "labels": ["O"], "problem_type": "regression"}, "problem_type"),
        ({"labels": ["a"]}, "a question-answering model has no labels"),
        ({"task": "feature-extraction"}, "pooling is recorded for"),
        (
            {"task": "feature-extraction", "pooling": {"modes": ["mean", "mean"], "normalize": True, "dimension": 8}},
            "repeat",
        ),
        ({"schema_version": 3}, "schema 3 is not one this server reads"),
    ],
)
def test_schema_rejects(tiny_model_dir: Path, tmp_path: Path, changes: dict, fragment: str) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    edit_manifest(model_dir, **changes)
    with pytest.raises(ManifestError, match=fragment):
        load_verified(model_dir)


def test_unlisted_files_are_reported(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    (model_dir / "notes.txt").write_text("hi")
    assert unlisted_files(model_dir, load_verified(model_dir)) == ["notes.txt"]


def _neuron_compile(**fields: object) -> dict[str, object]:
    return {"compiler": "neuron_emu 0.1.0", "auto_cast": "matmult", "auto_cast_type": "bf16", **fields}


def test_compile_spec_tensor_parallel_defaults_keep_old_manifests_valid() -> None:
    old = CompileSpec.model_validate(_neuron_compile())  # written before the tensor-parallel fields existed
    assert (old.tensor_parallel, old.num_attention_heads) == (1, None)
    sharded = CompileSpec.model_validate(_neuron_compile(tensor_parallel=2, num_attention_heads=12))
    assert CompileSpec.model_validate_json(sharded.model_dump_json()) == sharded


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"tensor_parallel": 0}, "greater than or equal to 1"),
        ({"tensor_parallel": 3, "num_attention_heads": 4}, "tensor_parallel 3 does not divide the 4 attention heads"),
        ({"tensor_parallel": 2, "backend": "torch_neuronx"}, "tensor_parallel 2 is only served for neuron_emu models"),
        ({"num_attention_heads": 0}, "greater than or equal to 1"),
    ],
)
def test_compile_spec_refuses_degrees_it_cannot_serve(fields: dict[str, object], fragment: str) -> None:
    with pytest.raises(ValidationError, match=fragment):
        CompileSpec.model_validate(_neuron_compile(**fields))


def test_a_schema_1_manifest_is_question_answering(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Models built before there were other tasks say task "extractive-qa" and schema 1: they still serve."""
    model_dir = copy(tiny_model_dir, tmp_path)
    manifest = json.loads((model_dir / "manifest.json").read_text())
    for key in ("labels", "problem_type", "pooling"):
        manifest.pop(key)
    manifest["source"] = {k: v for k, v in manifest["source"].items() if k in ("name", "architecture", "license")}
    (model_dir / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 1, "task": "extractive-qa"}))
    loaded = load_verified(model_dir)
    assert loaded.task == "question-answering" and loaded.source.origin == "folder"


def test_each_task_records_what_its_server_needs(tiny_model_dir: Path, tmp_path: Path) -> None:
    model_dir = copy(tiny_model_dir, tmp_path)
    pooling = {"modes": ["cls", "mean"], "normalize": True, "dimension": 64, "dense_layers": 1, "lowercase": True}
    edit_manifest(model_dir, task="feature-extraction", pooling=pooling)
    loaded = load_verified(model_dir)
    assert loaded.pooling is not None and loaded.pooling.modes == ["cls", "mean"] and loaded.pooling.lowercase
    edit_manifest(model_dir, task="text-classification", pooling=None, labels=["no", "yes"], problem_type="regression")
    assert load_verified(model_dir).labels == ["no", "yes"]


def _decoder_manifest(**changes: object) -> dict[str, object]:
    """A text-generation model compiled for NeuronCores, as `sagebox compile --model-dir` writes its manifest."""
    digest = "0" * 64
    data: dict[str, object] = {
        "tool_version": "test",
        "task": "text-generation",
        "variant": "neuron",
        "runtime": "neuron",
        "model_file": "decoder/decoder.json",
        "tokenizer": {"file": "tokenizer.json", "max_length": 256},
        "sequence_buckets": [128, 256],
        "source": {"name": "tiny", "architecture": "LlamaForCausalLM"},
        "compile": _neuron_compile(auto_cast="none", batch_size=4, tensor_parallel=2, num_attention_heads=6),
        "generation": {"architecture": "llama", "context_length": 256, "eos_token_ids": [2]},
        "files": {"decoder/decoder.json": digest, "tokenizer.json": digest, "config.json": digest},
    }
    return {**data, **changes}


def test_a_decoder_compiled_for_neuroncores_records_its_batch_and_max_length() -> None:
    manifest = parse(json.dumps(_decoder_manifest()))
    assert manifest.compile is not None and manifest.compile.batch_size == 4
    assert CompileSpec.model_validate(_neuron_compile()).batch_size is None  # encoders: dynamic batching


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"compile": _neuron_compile()}, "must record its compile batch_size"),
        ({"compile": None}, "must record its compile batch_size"),
        ({"generation": {"architecture": "llama", "context_length": 512, "eos_token_ids": [2]}}, "context_length"),
        ({"runtime": "onnxruntime", "variant": "fp32"}, "runs on the torch runtime, or compiled for NeuronCores"),
        ({"task": "question-answering", "generation": None, "runtime": "torch", "variant": "fp32"}, "text-generation"),
    ],
)
def test_a_compiled_decoders_manifest_refuses_what_it_cannot_serve(changes: dict[str, object], fragment: str) -> None:
    with pytest.raises(ManifestError, match=fragment):
        parse(json.dumps(_decoder_manifest(**changes)))
