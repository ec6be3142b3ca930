"""CPU kinds from /proc/cpuinfo flags, the SAGEBOX_CPU_KIND / SAGEBOX_RUNTIME variables, and a manifest's choice of
build per kind (container/cpu_kind.py, Manifest.for_cpu)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from container.cpu_kind import detect, kind_of
from container.env import EnvError, ServerSettings
from container.handlers.openvino import static_buckets
from container.manifest import Manifest, QuantizationSpec, RuntimeBuild, load_verified

ICE_LAKE = ["fpu", "sse2", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni"]
SAPPHIRE_RAPIDS = [*ICE_LAKE, "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8"]
SKYLAKE = ["fpu", "sse2", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl"]
ZEN3 = ["fpu", "sse2", "avx2", "fma"]


@pytest.mark.parametrize(
    ("flags", "machine", "kind"),
    [
        (SAPPHIRE_RAPIDS, "x86_64", "amx"),
        (ICE_LAKE, "x86_64", "avx512_vnni"),
        (SKYLAKE, "x86_64", "avx512"),
        (ZEN3, "x86_64", "avx2"),
        (["fpu", "sse2"], "x86_64", "other"),
        ([], "aarch64", "arm64"),
    ],
)
def test_the_kind_is_named_for_the_best_int8_instructions(flags: list[str], machine: str, kind: str) -> None:
    assert kind_of(flags, machine) == kind


def test_a_forced_kind_wins_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: " + " ".join(ZEN3) + "\n")
    assert detect({}, cpuinfo) == "avx2"
    assert detect({"SAGEBOX_CPU_KIND": "AMX"}, cpuinfo) == "amx"
    with pytest.raises(ValueError, match="SAGEBOX_CPU_KIND must be one of"):
        detect({"SAGEBOX_CPU_KIND": "avx9"}, cpuinfo)
    with pytest.raises(EnvError, match="SAGEBOX_CPU_KIND"):
        ServerSettings.from_env({"SAGEBOX_CPU_KIND": "avx9"})
    with pytest.raises(EnvError, match="SAGEBOX_RUNTIME must be one of auto, onnxruntime, openvino"):
        ServerSettings.from_env({"SAGEBOX_RUNTIME": "tensorrt"})
    settings = ServerSettings.from_env({"SAGEBOX_RUNTIME": "OpenVINO", "SAGEBOX_STATIC_SHAPES_MB": "64"})
    assert (settings.runtime_pin, settings.static_shapes_mb) == ("openvino", 64)
    assert ServerSettings.from_env({}).static_shapes_mb is None


def _with_openvino(manifest: Manifest, kinds: list[str]) -> Manifest:
    spec = QuantizationSpec(backend="openvino", mode="static", per_channel=True, calibration_batches=10)
    build = RuntimeBuild(runtime="openvino", model_file="openvino/model.xml", quantization=spec, cpu_kinds=kinds)
    files = {**manifest.files, "openvino/model.xml": "0" * 64, "openvino/model.bin": "1" * 64}
    return dataclasses.replace(manifest, alternatives=[build], files=files)


def test_each_kind_gets_its_build_the_rest_the_fallback(tiny_onnx_model_dir: Path) -> None:
    base = load_verified(tiny_onnx_model_dir)
    base = dataclasses.replace(
        base,
        variant="int8",
        quantization=QuantizationSpec(backend="onnxruntime", mode="dynamic", per_channel=True, calibration_batches=0),
    )
    manifest = _with_openvino(base, ["avx512_vnni", "amx"])
    chosen, decision = manifest.for_cpu("amx")
    assert (chosen.runtime, chosen.model_file, chosen.alternatives) == ("openvino", "openvino/model.xml", [])
    assert chosen.quantization is not None and chosen.quantization.backend == "openvino"
    assert decision.cpu_kind == "amx"
    fallback, decision = manifest.for_cpu("avx2")
    assert (fallback.runtime, fallback.model_file) == ("onnxruntime", base.model_file)
    assert decision.reason == "the fallback: no build is chosen for avx2"
    pinned, decision = manifest.for_cpu("avx2", "openvino")
    assert pinned.runtime == "openvino" and "pinned" in decision.reason
    with pytest.raises(ValueError, match="has no torchscript build"):
        manifest.for_cpu("avx2", "torchscript")
    assert base.for_cpu("amx")[1].reason == "the only build"
    # A single-build manifest reads as before: no alternatives key at all.
    assert '"alternatives"' not in base.to_json() and '"alternatives"' in manifest.to_json()
    assert Manifest.model_validate_json(manifest.to_json()) == manifest


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"model_file": "openvino/missing.xml"}, "not listed in files"),
        ({"runtime": "onnxruntime"}, "another runtime"),
        ({"runtime": "torch"}, "not an alternative build"),
        ({"cpu_kinds": ["avx9"]}, "unknown CPU kind"),
        ({"quantization": None}, "must record its quantization"),
    ],
)
def test_an_alternative_build_is_checked(tiny_onnx_model_dir: Path, change: dict[str, object], fragment: str) -> None:
    base = load_verified(tiny_onnx_model_dir)
    base = dataclasses.replace(
        base,
        variant="int8",
        quantization=QuantizationSpec(backend="onnxruntime", mode="dynamic", per_channel=True, calibration_batches=0),
    )
    data = _with_openvino(base, ["amx"]).model_dump()
    data["alternatives"][0].update(change)
    with pytest.raises(ValueError, match=fragment):
        Manifest.model_validate(data)


def test_static_graphs_go_to_the_smallest_buckets_within_the_budget() -> None:
    buckets = [64, 128, 256, 384]
    assert static_buckets(buckets, 100 << 20, 10_000 << 20) == buckets
    assert static_buckets(buckets, 100 << 20, 450 << 20) == [64, 128]  # 200 MB a graph
    assert static_buckets(buckets, 100 << 20, 0) == []
