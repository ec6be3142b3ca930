"""Synthesis refuses an inf2/trn1 target whose text-generation model does not fit a NeuronCore at the artifact's
tensor-parallel degree, from the manifest and config.json inside its model.tar.gz (infra.plan.check_decoder_fit)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from container.manifest import CompileSpec, GenerationSpec, Manifest, SourceSpec, TokenizerSpec
from infra.catalog import instance
from infra.errors import TargetError
from infra.model_artifact import inspect_artifact, read_member
from infra.plan import check_decoder_fit, plan_endpoint
from infra.settings import AppSettings
from infra.targets import Target, parse_targets

REPO = Path(__file__).resolve().parents[2]
OPT_66B = json.loads((REPO / "infra" / "examples" / "llm_configs" / "opt-66b.json").read_text())
OPT_30B = json.loads((REPO / "infra" / "examples" / "llm_configs" / "opt-30b.json").read_text())


def decoder_tarball(
    path: Path,
    config: dict[str, Any] | None,
    *,
    tp: int,
    context: int = 2048,
    batch: int = 1,
    auto_cast: str = "matmult",
    model_name: str = "facebook/opt-66b",
) -> Path:
    """A model.tar.gz as `sagebox compile` writes a decoder: members sorted (config.json before manifest.json), the
    manifest a text-generation model compiled for NeuronCores; `config` None leaves config.json out of the tarball
    (the manifest still lists it)."""
    config_bytes = json.dumps(config if config is not None else {}).encode()
    files = {"config.json": config_bytes, "graphs/model.pt": b"\0" * 1024, "tokenizer.json": b"{}"}
    manifest = Manifest(
        tool_version="0.1.0",
        task="text-generation",
        variant="neuron",
        runtime="neuron",
        model_file="graphs/model.pt",
        tokenizer=TokenizerSpec(file="tokenizer.json", max_length=context),
        sequence_buckets=[context],
        source=SourceSpec(name=model_name, architecture="opt", origin="hub"),
        compile=CompileSpec(
            backend="neuron_emu",
            compiler="test",
            auto_cast=auto_cast,
            auto_cast_type="bf16",
            tensor_parallel=tp,
            num_attention_heads=(config or OPT_66B).get("num_attention_heads", 72),
            batch_size=batch,
        ),
        generation=GenerationSpec(architecture="opt", context_length=context, eos_token_ids=[2]),
        files={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    )
    members = {**files, "manifest.json": manifest.to_json().encode()}
    if config is None:
        del members["config.json"]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size = len(members[name])
            tar.addfile(info, io.BytesIO(members[name]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def settings_for(tmp_path: Path) -> AppSettings:
    (tmp_path / "container").mkdir(exist_ok=True)
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    return AppSettings(model_dir=tmp_path, build_context=tmp_path, allow_emulated=True)


def target(model: Path | str, instance_type: str, tp: int, **fields: Any) -> Target:
    spec = {"name": "llm", "instance_type": instance_type, "variant": "neuron", "tensor_parallel": tp, **fields}
    return parse_targets({"targets": [{**spec, "model_data": str(model)}]})[0]


def test_a_decoder_too_big_for_its_degree_is_refused_in_one_line(tmp_path: Path) -> None:
    model = decoder_tarball(tmp_path / "tp8" / "model.tar.gz", OPT_66B, tp=8)
    with pytest.raises(TargetError) as caught:
        plan_endpoint(target(model, "ml.inf2.48xlarge", 8), settings_for(tmp_path))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "target 'llm': model facebook/opt-66b does not fit ml.inf2.48xlarge at tensor_parallel 8: 16."
    )
    assert "GiB per NeuronCore needed (bf16 weights 15." in message and "KV cache of 1 x 2048 tokens" in message
    assert "16.0 GiB available" in message


def test_the_same_model_at_24_cores_plans(tmp_path: Path) -> None:
    model = decoder_tarball(tmp_path / "tp24" / "model.tar.gz", OPT_66B, tp=24)
    plan = plan_endpoint(target(model, "ml.inf2.48xlarge", 24), settings_for(tmp_path))
    assert plan.tensor_parallel == 24


def test_the_compiled_batch_lines_count_in_the_cache(tmp_path: Path) -> None:
    inf2 = instance("ml.inf2.48xlarge")
    fits = decoder_tarball(tmp_path / "b1" / "model.tar.gz", OPT_66B, tp=24, batch=1)
    check_decoder_fit("llm", inf2, 24, inspect_artifact(fits))  # no error
    many = decoder_tarball(tmp_path / "b64" / "model.tar.gz", OPT_66B, tp=24, batch=64)
    with pytest.raises(TargetError, match=r"KV cache of 64 x 2048 tokens"):
        check_decoder_fit("llm", inf2, 24, inspect_artifact(many))
    with pytest.raises(TargetError, match=r"KV cache of 64 x 2048 tokens"):
        plan_endpoint(target(many, "ml.inf2.48xlarge", 24), settings_for(tmp_path))


def test_weights_are_fp32_when_nothing_is_cast(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    cast = decoder_tarball(tmp_path / "bf16" / "model.tar.gz", OPT_30B, tp=4, model_name="facebook/opt-30b")
    assert plan_endpoint(target(cast, "ml.inf2.24xlarge", 4), settings).tensor_parallel == 4
    fp32 = decoder_tarball(
        tmp_path / "fp32" / "model.tar.gz", OPT_30B, tp=4, auto_cast="none", model_name="facebook/opt-30b"
    )
    with pytest.raises(TargetError, match=r"model facebook/opt-30b does not fit .* \(fp32 weights 28\."):
        plan_endpoint(target(fp32, "ml.inf2.24xlarge", 4), settings)


def test_no_config_in_the_tarball_skips_the_check(tmp_path: Path) -> None:
    model = decoder_tarball(tmp_path / "noconfig" / "model.tar.gz", None, tp=8)
    assert read_member(model, "config.json") is None
    plan = plan_endpoint(target(model, "ml.inf2.48xlarge", 8), settings_for(tmp_path))
    assert plan.tensor_parallel == 8


def test_an_s3_model_is_not_read(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    s3 = target("s3://bucket/llm/model.tar.gz", "ml.inf2.48xlarge", 8, neuron_backend="neuron_emu")
    plan = plan_endpoint(s3, settings)
    assert plan.tensor_parallel == 8


def test_a_config_the_planner_cannot_read_is_one_line(tmp_path: Path) -> None:
    model = decoder_tarball(tmp_path / "bert" / "model.tar.gz", {"model_type": "bert"}, tp=8)
    with pytest.raises(TargetError) as caught:
        plan_endpoint(target(model, "ml.inf2.48xlarge", 8), settings_for(tmp_path))
    assert str(caught.value).startswith("target 'llm': ") and "config.json is not a decoder config" in str(caught.value)
    assert "model_type 'bert'" in str(caught.value)


def test_read_member_reads_config_json_from_the_tarball(tmp_path: Path) -> None:
    model = decoder_tarball(tmp_path / "m" / "model.tar.gz", OPT_66B, tp=24)
    assert json.loads(read_member(model, "config.json") or b"") == OPT_66B
    assert read_member(model, "absent.json") is None
