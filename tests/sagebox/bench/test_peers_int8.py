"""The INT8 peers of the BERT-base latency benchmark without building or timing anything: the peer list, the
arguments, the checks and ratios computed from a small made-up result, which INT8 counts as Sagebox's choice, the
rows of a peer that failed, the recipe stamps that decide reuse, and a peer that fails becoming a note."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sagebox.bench import models as bench
from sagebox.bench import peers_int8 as peers
from sagebox.bench.machine import INTERESTING_FLAGS, cpu_info

# --- the peers --------------------------------------------------------------------------------------------------------


def test_the_peers_are_the_five_named_in_the_issue_and_none_is_a_sagebox_variant() -> None:
    assert peers.PEER_NAMES == (
        "openvino-nncf-dynamic",
        "openvino-nncf-static",
        "openvino-fp32",
        "pt2e-int8",
        "pt2e-fp32",
    )
    assert not set(peers.PEER_NAMES) & {v.name for v in bench.VARIANTS}
    assert peers.int8_peers() == ["openvino-nncf-dynamic", "openvino-nncf-static", "pt2e-int8"]
    by_name = {p.name: p for p in peers.PEERS}
    # the static NNCF peer is the dynamic one's IR reshaped, not a second quantization
    assert by_name["openvino-nncf-static"].artifact == by_name["openvino-nncf-dynamic"].artifact
    assert [p.shapes for p in peers.PEERS] == ["dynamic", "static", "dynamic", "static", "static"]
    assert peers.openvino_config(2) == {"INFERENCE_NUM_THREADS": 2, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    assert peers.NNCF_SUBSET_SIZE == 100


def test_the_openvino_variant_gets_its_own_name_and_a_baseline() -> None:
    assert bench.int8_name("openvino", "static") == "int8-openvino"
    assert bench.int8_name("onnxruntime", "dynamic") == "int8-onnx-dynamic"
    assert bench.int8_name("torch", "static") == "int8-torch-static"
    openvino = [v for v in bench.VARIANTS if v.backend == "openvino"]
    assert [v.name for v in openvino] == ["int8-openvino"]
    assert openvino[0].fp32_source in {v.name for v in bench.VARIANTS if v.precision == "fp32"}


def test_the_cpu_flags_int8_speed_depends_on_are_reported(tmp_path: Path) -> None:
    assert {"avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"} <= set(INTERESTING_FLAGS)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Sapphire\nflags\t\t: avx2 avx512f avx512_vnni amx_tile amx_int8 amx_bf16\n")
    flags: Any = cpu_info(cpuinfo)["flags"]
    assert flags["amx_tile"] and flags["amx_int8"] and flags["amx_bf16"] and flags["avx512_vnni"]


# --- arguments --------------------------------------------------------------------------------------------------------


def test_seqs_default_to_128_and_384_and_the_longest_is_the_primary() -> None:
    args = bench.parse_args(["--threads", "2"])
    assert args.seqs == [128, 384] and args.seq == 384 and not args.skip_peers
    args = bench.parse_args(["--seqs", "384,128,128", "--skip-peers"])
    assert args.seqs == [128, 384] and args.skip_peers


def test_seq_still_times_one_length() -> None:
    args = bench.parse_args(["--seq", "128"])
    assert args.seqs == [128] and args.seq == 128


@pytest.mark.parametrize("argv", [["--seq", "128", "--seqs", "128,384"], ["--seqs", "128,x"], ["--seqs", "0,128"]])
def test_bad_seq_arguments_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(argv)
    assert "error" in capsys.readouterr().err


def test_parse_seqs() -> None:
    assert bench.parse_seqs("384, 128") == [128, 384]
    with pytest.raises(argparse.ArgumentTypeError):
        bench.parse_seqs(",")


# --- rows, checks, the chosen INT8 ------------------------------------------------------------------------------------


def latency(**p50: float) -> dict[str, dict[str, float]]:
    return {name.replace("_", "-"): {"p50_ms": ms, "p90_ms": ms * 1.1} for name, ms in p50.items()}


def peers_report(errors: Mapping[str, str] | None = None) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for peer in peers.PEERS:
        compile_seconds = {"dynamic": 1.5} if peer.shapes == "dynamic" else {"128": 2.0, "384": 3.0}
        rows[peer.name] = {
            "precision": peer.precision,
            "engine": peer.engine,
            "shapes": peer.shapes,
            "compile_seconds": compile_seconds,
        }
        if errors and peer.name in errors:
            rows[peer.name]["error"] = errors[peer.name]
    return {"peers": rows}


def made_up_result(default_int8: str = "int8-onnx-dynamic", flags: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """Two seqs; Sagebox's INT8 at 20 / 60 ms, its fastest FP32 at 50 / 200 ms; the fastest INT8 peer is
    openvino-nncf-static at 128 (25 ms) and pt2e-int8 at 384 (50 ms); the dynamic NNCF peer failed at 384."""
    at_128 = latency(fp32_onnx_fused=50.0, fp32_torchscript=70.0, int8_onnx_dynamic=20.0, int8_openvino=18.0)
    at_384 = latency(fp32_onnx_fused=220.0, fp32_torchscript=200.0, int8_onnx_dynamic=60.0, int8_openvino=55.0)
    peers_128 = latency(openvino_nncf_dynamic=30.0, openvino_nncf_static=25.0, openvino_fp32=45.0, pt2e_int8=27.0)
    peers_384 = latency(openvino_nncf_static=52.0, openvino_fp32=190.0, pt2e_int8=50.0, pt2e_fp32=210.0)
    sections = {}
    for seq, variants, peer_latency, best in (
        ("128", at_128, peers_128, "fp32-onnx-fused"),
        ("384", at_384, peers_384, "fp32-torchscript"),
    ):
        rows = bench.peer_rows(peer_latency, peers_report(), variants[best]["p50_ms"], int(seq))
        sections[seq] = {"variants": variants, "best_fp32": best, "peers": rows}
    return {
        "machine": {"flags": dict(flags or {})},
        "variants": at_384,
        "latency_by_seq": sections,
        "default_int8": default_int8,
    }


def test_peer_rows_carry_ratios_compile_seconds_and_why_a_peer_has_no_time() -> None:
    rows = made_up_result()["latency_by_seq"]["384"]["peers"]
    assert rows["pt2e-int8"]["ratio_to_best_fp32_p50"] == 0.25  # 50 / 200
    assert rows["pt2e-int8"]["compile_seconds"] == 3.0  # this seq's compile
    assert rows["openvino-fp32"]["compile_seconds"] == 1.5  # compiled once, dynamic
    assert "p50_ms" not in rows["openvino-nncf-dynamic"] and rows["openvino-nncf-dynamic"]["error"] == "not timed"
    failed = bench.peer_rows({}, peers_report({"pt2e-int8": "RuntimeError: boom"}), 100.0, 384)
    assert failed["pt2e-int8"]["error"] == "RuntimeError: boom"


def test_checks_compare_sagebox_int8_with_the_fastest_int8_peer_at_each_seq() -> None:
    result = made_up_result()
    flat = bench.peer_checks(result)
    at_128 = flat["sagebox_int8_over_fastest_peer_int8_p50_at_128"]
    assert (at_128["value"], at_128["peer"], at_128["sagebox"]) == (0.8, "openvino-nncf-static", "int8-onnx-dynamic")
    assert at_128["passed"] and at_128["target"] == "<= 1.0"
    at_384 = flat["sagebox_int8_over_fastest_peer_int8_p50_at_384"]
    assert (at_384["value"], at_384["peer"], at_384["passed"]) == (1.2, "pt2e-int8", False)  # 60 / 50
    # INT8 over the fastest Sagebox FP32 at 384 (TorchScript there, not the ONNX FP32 fastest at 128): 60 / 200
    fp32 = flat["int8_over_fp32_p50_at_384"]
    assert (fp32["value"], fp32["fp32"], fp32["passed"], fp32["target"]) == (0.3, "fp32-torchscript", True, "<= 0.35")
    assert set(flat) == {
        "sagebox_int8_over_fastest_peer_int8_p50_at_128",
        "sagebox_int8_over_fastest_peer_int8_p50_at_384",
        "int8_over_fp32_p50_at_384",
    }
    # each seq's section holds its own checks under the short names
    assert set(result["latency_by_seq"]["128"]["checks"]) == {"sagebox_int8_over_fastest_peer_int8_p50"}
    assert result["latency_by_seq"]["384"]["checks"]["int8_over_fp32_p50_at_384"] == fp32


def test_without_peers_only_the_fp32_check_is_made_and_with_no_int8_peer_timed_the_check_fails() -> None:
    result = made_up_result()
    for section in result["latency_by_seq"].values():
        del section["peers"]
    assert set(bench.peer_checks(result)) == {"int8_over_fp32_p50_at_384"}
    result = made_up_result()
    for section in result["latency_by_seq"].values():
        section["peers"] = {name: {"error": "not timed"} for name in peers.PEER_NAMES}
    check = bench.peer_checks(result)["sagebox_int8_over_fastest_peer_int8_p50_at_128"]
    assert check["value"] is None and not check["passed"] and check["peer"] is None


def test_the_chosen_int8_follows_the_cpu_kind_table() -> None:
    # infra/data/cpu_kinds.json: OpenVINO on AVX-512 VNNI and AMX, ONNX Runtime (the default) elsewhere.
    assert bench.chosen_int8_variant(made_up_result(flags={"avx512_vnni": True})) == "int8-openvino"
    assert bench.chosen_int8_variant(made_up_result(flags={"amx_tile": True, "amx_int8": True})) == "int8-openvino"
    assert bench.chosen_int8_variant(made_up_result(flags={"avx2": True})) == "int8-onnx-dynamic"
    assert bench.chosen_int8_variant(made_up_result(flags={"avx512_vnni": False})) == "int8-onnx-dynamic"
    unmeasured = made_up_result(flags={"avx512_vnni": True})
    del unmeasured["variants"]["int8-openvino"]
    assert bench.chosen_int8_variant(unmeasured) == "int8-onnx-dynamic"
    # and the checks follow the choice: 55 / 50 at 384
    flat = bench.peer_checks(made_up_result(flags={"avx512_vnni": True}))
    assert flat["sagebox_int8_over_fastest_peer_int8_p50_at_384"]["value"] == 1.1
    assert flat["int8_over_fp32_p50_at_384"]["int8"] == "int8-openvino"


def test_fastest_skips_peers_without_a_time() -> None:
    rows: dict[str, dict[str, Any]] = {"a": {"p50_ms": 3.0}, "b": {"error": "x"}, "c": {"p50_ms": 2.0}}
    assert peers.fastest(rows, ["a", "b", "c"]) == "c"
    assert peers.fastest(rows, ["b", "missing"]) is None


# --- reuse and failures -----------------------------------------------------------------------------------------------


def test_an_artifact_is_reused_only_when_its_recipe_stamp_matches(tmp_path: Path) -> None:
    source = tmp_path / "model.onnx"
    source.write_bytes(b"onnx")
    wanted = peers.recipe("openvino-fp32", source, 0, {"openvino": "1"})
    out = tmp_path / "peers" / "openvino-fp32"
    seconds = peers.build_into(out, wanted, lambda tmp: (tmp / "model.xml").write_text("ir"))
    assert seconds >= 0 and (out / "model.xml").read_text() == "ir"
    assert peers.reusable(out, wanted)
    assert not peers.reusable(out, peers.recipe("openvino-fp32", source, 0, {"openvino": "2"}))  # library changed
    assert not peers.reusable(out, peers.recipe("openvino-fp32", source, 100, {"openvino": "1"}))
    source.write_bytes(b"a new onnx graph")  # Sagebox's FP32 rebuilt
    assert not peers.reusable(out, peers.recipe("openvino-fp32", source, 0, {"openvino": "1"}))
    assert not peers.reusable(tmp_path / "nothing", wanted)


def test_a_failed_build_leaves_the_old_artifact_and_no_temporary_folder(tmp_path: Path) -> None:
    out = tmp_path / "pt2e-int8"
    peers.build_into(out, {"v": 1}, lambda tmp: (tmp / "model.pt2").write_text("old"))

    def broken(tmp: Path) -> None:
        (tmp / "model.pt2").write_text("half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError):
        peers.build_into(out, {"v": 2}, broken)
    assert (out / "model.pt2").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pt2e-int8"]


class FakeRequest:
    def __init__(self) -> None:
        self.fed: list[dict[str, np.ndarray]] = []

    def infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.fed.append(feed)
        return {}


def test_a_peer_that_fails_becomes_a_note_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"onnx")
    monkeypatch.setattr(peers, "openvino_versions", lambda: {"openvino": "test"})

    def nncf_fails(onnx: Path, feeds: Any, out: Path) -> None:
        raise RuntimeError("nncf: no calibration\nmore lines")

    monkeypatch.setattr(peers, "build_openvino_nncf", nncf_fails)
    monkeypatch.setattr(peers, "build_openvino_fp32", lambda onnx, out: (out / "model.xml").write_text("ir"))
    compiled: list[tuple[int, int | None]] = []
    requests: list[FakeRequest] = []

    def fake_request(xml: Path, threads: int, static_seq: int | None = None) -> FakeRequest:
        compiled.append((threads, static_seq))
        requests.append(FakeRequest())
        return requests[-1]

    monkeypatch.setattr(peers, "openvino_request", fake_request)
    feeds = [{name: np.ones((1, 8), np.int64) for name in peers.INPUT_NAMES}]
    ov_peers = [p for p in peers.PEERS if p.engine == "openvino"]
    bench_peers = peers.Int8Peers(tmp_path / "peers", onnx, tmp_path, feeds, threads=2, peers=ov_peers)
    bench_peers.build(reuse=True)
    inputs = {name: np.zeros((1, 128), np.int64) for name in peers.INPUT_NAMES}
    assert list(bench_peers.runners(inputs, 128)) == ["openvino-fp32"]
    assert list(bench_peers.runners(inputs, 384)) == ["openvino-fp32"]
    assert compiled == [(2, None)]  # dynamic shapes: compiled once for both seqs
    assert requests[0].fed[0] is not inputs and set(requests[0].fed[0]) == set(peers.INPUT_NAMES)
    report = bench_peers.report()["peers"]
    assert report["openvino-nncf-dynamic"]["error"] == "RuntimeError: nncf: no calibration"
    assert report["openvino-nncf-static"]["error"] == "RuntimeError: nncf: no calibration"  # the same artifact
    assert report["openvino-fp32"]["build_seconds"] is not None and not report["openvino-fp32"]["reused"]
    assert set(report["openvino-fp32"]["compile_seconds"]) == {"dynamic"}
    again = peers.Int8Peers(tmp_path / "peers", onnx, tmp_path, feeds, threads=2, peers=ov_peers)
    again.build(reuse=True)
    assert again.report()["peers"]["openvino-fp32"]["reused"]


def test_the_static_nncf_peer_is_compiled_once_per_seq_from_the_shared_ir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(b"onnx")
    monkeypatch.setattr(peers, "openvino_versions", lambda: {"openvino": "test"})
    built: list[str] = []

    def nncf(onnx: Path, feeds: Any, out: Path) -> None:
        built.append(out.name)
        (out / "model.xml").write_text("int8 ir")

    monkeypatch.setattr(peers, "build_openvino_nncf", nncf)
    compiled: list[tuple[str, int | None]] = []

    def fake_request(xml: Path, threads: int, static_seq: int | None = None) -> FakeRequest:
        compiled.append((xml.parent.name, static_seq))
        return FakeRequest()

    monkeypatch.setattr(peers, "openvino_request", fake_request)
    feeds = [{name: np.ones((1, 8), np.int64) for name in peers.INPUT_NAMES}]
    nncf_peers = [p for p in peers.PEERS if p.artifact == peers.OV_INT8]
    bench_peers = peers.Int8Peers(tmp_path / "peers", onnx, tmp_path, feeds, threads=2, peers=nncf_peers)
    bench_peers.build(reuse=False)
    assert len(built) == 1  # one quantization for both peers
    for seq in (128, 384):
        inputs = {name: np.zeros((1, seq), np.int64) for name in peers.INPUT_NAMES}
        assert set(bench_peers.runners(inputs, seq)) == {"openvino-nncf-dynamic", "openvino-nncf-static"}
    ir = peers.OV_INT8
    assert compiled == [(ir, None), (ir, 128), (ir, 384)]
    report = bench_peers.report()["peers"]
    assert set(report["openvino-nncf-static"]["compile_seconds"]) == {"128", "384"}
    assert report["openvino-nncf-static"]["build_seconds"] == report["openvino-nncf-dynamic"]["build_seconds"]
