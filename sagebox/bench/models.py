"""Model benchmark, one run: FP32 vs INT8 latency at BERT-base dims, artifact sizes, and MiniLM EM/F1.

    python scripts/bench_models.py                      # writes .sagebox/bench/models.json and prints tables

Latency: every variant is loaded through the serving Predictor (the handler the server runs) and timed on one
full-length feature (batch 1, at each of --seqs, 128 and 384 tokens by default), variants interleaved round by round
(order rotated each round) so machine noise hits all of them alike; P50/P90 are over rounds. INT8 is compared with
the fastest FP32 artifact Sagebox ships, measured in the same rounds. Other toolchains' INT8 recipes (OpenVINO +
NNCF, PyTorch 2 export + inductor: sagebox/bench/peers_int8.py) are timed in the same rounds, on the same inputs,
with the same threads, unless --skip-peers. Accuracy: the trained MiniLM demo model goes through
`sagebox quantize` (the same code a user's model goes through) for each backend/mode, scored on its held-out
dev split.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from container.handlers.base import MODEL_INPUTS, ModelInputs
from container.manifest import ManifestError, load_verified
from container.predictor import Predictor, PredictorOptions
from sagebox.bench.latency import interleaved_latency, summarize
from sagebox.bench.machine import CpuSnapshot, cpu_info, load_between
from sagebox.bench.peers_int8 import PEERS_DIR, Int8Peers, fastest, int8_peers
from sagebox.errors import SageboxError
from sagebox.paths import state_dir
from sagebox.pipeline.quantize.options import (
    DEFAULT_BACKEND,
    DEFAULT_MODE,
    RUNTIME_OF,
    Backend,
    Mode,
    QuantizeOptions,
)

if TYPE_CHECKING:
    from sagebox.pipeline.load.hf_model import QAModule

Json = dict[str, Any]

TARGET_LATENCY_RATIO = 0.5
TARGET_SIZE_RATIO = 0.45
TARGET_F1_DROP = 1.0
TARGET_OVER_PEER_INT8 = 1.0  # Sagebox's chosen INT8 P50 over the fastest INT8 peer's, at every seq
TARGET_INT8_OVER_FP32_AT_384 = 0.35  # Sagebox's chosen INT8 P50 over its fastest FP32's, at 384 tokens
DEFAULT_SEQS = (128, 384)
# Environment that limits torch's kernels (ATen, oneDNN, MKL, FBGEMM) to AVX2, to show what an AVX2-only CPU
# would see. ONNX Runtime has no such switch, so only TorchScript variants are re-measured this way.
AVX2_ONLY_ENV = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
}


@dataclass(frozen=True)
class Variant:
    name: str
    precision: Literal["fp32", "int8"]
    backend: Backend
    detail: str
    fuse: bool = False  # FP32 ONNX only
    mode: Mode | None = None  # INT8 only
    fp32_source: str = ""  # INT8 only: the FP32 variant it is quantized from
    reduce_range: bool = False  # INT8 only: 7-bit weights (the accuracy gate's first fallback)


VARIANTS = (
    Variant("fp32-onnx-fused", "fp32", "onnxruntime", "ONNX, ORT transformer fusions", fuse=True),
    Variant("fp32-onnx-plain", "fp32", "onnxruntime", "ONNX, no offline fusion"),
    Variant("fp32-torchscript", "fp32", "torch", "TorchScript trace + freeze"),
    Variant(
        "int8-onnx-dynamic",
        "int8",
        "onnxruntime",
        "ORT quantize_dynamic of the fused graph, per-channel",
        mode="dynamic",
        fp32_source="fp32-onnx-fused",
    ),
    Variant(
        "int8-onnx-dynamic-7bit",
        "int8",
        "onnxruntime",
        "ORT quantize_dynamic of the fused graph, per-channel, 7-bit weights (the gate's first fallback)",
        mode="dynamic",
        fp32_source="fp32-onnx-fused",
        reduce_range=True,
    ),
    Variant(
        "int8-onnx-static",
        "int8",
        "onnxruntime",
        "ORT quantize_static, QDQ U8S8, of the plain graph, per-channel",
        mode="static",
        fp32_source="fp32-onnx-fused",
    ),
    Variant(
        "int8-torch-dynamic",
        "int8",
        "torch",
        "torch.ao quantize_dynamic (x86 engine), per-channel",
        mode="dynamic",
        fp32_source="fp32-torchscript",
    ),
    Variant(
        "int8-torch-static",
        "int8",
        "torch",
        "torch.ao static INT8 Linear (x86 engine), per-channel",
        mode="static",
        fp32_source="fp32-torchscript",
    ),
    Variant(
        "int8-openvino",
        "int8",
        "openvino",
        "OpenVINO IR from the PyTorch module, NNCF INT8 (TRANSFORMER, MIXED)",
        mode="static",
        fp32_source="fp32-onnx-fused",
    ),
)


def int8_name(backend: str, mode: str) -> str:
    if backend == "openvino":
        return "int8-openvino"  # one recipe (static, NNCF), so no mode in the name
    return f"int8-{'onnx' if backend == 'onnxruntime' else 'torch'}-{mode}"


def build_variant(
    variant: Variant,
    hf_folder: Path,
    out: Path,
    module: QAModule,
    calibration: Sequence[ModelInputs],
    batches: int,
) -> None:
    from sagebox.pipeline.export.servable import build_fp32
    from sagebox.pipeline.quantize.int8 import build_int8

    if variant.precision == "fp32":
        build_fp32(hf_folder, out, RUNTIME_OF[variant.backend], module, fuse=variant.fuse)
        return
    assert variant.mode is not None
    options = QuantizeOptions(
        backend=variant.backend, mode=variant.mode, calibration_batches=batches, reduce_range=variant.reduce_range
    )
    feeds = list(calibration) if variant.mode == "static" else []
    build_int8(hf_folder, out.parent / variant.fp32_source, out, options, feeds, module)


def build_all(
    variants: Sequence[Variant],
    hf_folder: Path,
    work: Path,
    calibration: Sequence[ModelInputs],
    batches: int,
    reuse: bool,
    say: Callable[[str], None],
) -> dict[str, float]:
    from sagebox.pipeline.load.hf_model import load_qa_module

    module: QAModule | None = None
    seconds: dict[str, float] = {}
    for variant in variants:
        out = work / variant.name
        if reuse and out.is_dir():
            try:
                load_verified(out)
                say(f"reusing {out}")
                continue
            except ManifestError:
                pass
        module = module or load_qa_module(hf_folder)
        say(f"building {variant.name}: {variant.detail}")
        started = time.monotonic()
        build_variant(variant, hf_folder, out, module, calibration, batches)
        seconds[variant.name] = round(time.monotonic() - started, 1)
    return seconds


def model_file_bytes(model_dir: Path) -> int:
    """The model file's size; an OpenVINO IR's .xml counts with its .bin (the weights)."""
    model = model_dir / load_verified(model_dir).model_file
    weights = model.with_suffix(".bin")
    return model.stat().st_size + (weights.stat().st_size if model.suffix == ".xml" and weights.is_file() else 0)


def variant_rows(work: Path, latency: Mapping[str, Json]) -> tuple[Json, str]:
    """Every Sagebox variant's row at one seq, and the fastest Sagebox FP32 there."""
    best_fp32 = min((v.name for v in VARIANTS if v.precision == "fp32"), key=lambda n: latency[n]["p50_ms"])
    by_name = {v.name: v for v in VARIANTS}
    rows: Json = {}
    for v in VARIANTS:
        same = [f.name for f in VARIANTS if f.precision == "fp32" and f.backend == v.backend]
        # an INT8 backend without an FP32 variant of its own (OpenVINO) is compared with the FP32 it is built from
        same_backend = min(same, key=lambda n: latency[n]["p50_ms"]) if same else by_name[v.fp32_source].name
        rows[v.name] = {
            "precision": v.precision,
            "backend": v.backend,
            "detail": v.detail,
            "model_file_bytes": model_file_bytes(work / v.name),
            **latency[v.name],
            "ratio_to_best_fp32_p50": round(latency[v.name]["p50_ms"] / latency[best_fp32]["p50_ms"], 3),
            "ratio_to_same_backend_fp32_p50": round(latency[v.name]["p50_ms"] / latency[same_backend]["p50_ms"], 3),
        }
    return rows, best_fp32


def peer_rows(latency: Mapping[str, Json], peers_report: Json, best_fp32_p50: float, seq: int) -> Json:
    """Every peer's row at one seq: its latency (or why it has none) beside Sagebox's fastest FP32."""
    rows: Json = {}
    for name, peer in peers_report["peers"].items():
        compile_s = peer["compile_seconds"]
        row: Json = {
            "precision": peer["precision"],
            "engine": peer["engine"],
            "shapes": peer["shapes"],
            "compile_seconds": compile_s.get(str(seq), compile_s.get("dynamic")),
        }
        if peer.get("model_file_bytes"):
            row["model_file_bytes"] = peer["model_file_bytes"]
        if name in latency:
            row.update(latency[name])
            row["ratio_to_best_fp32_p50"] = round(latency[name]["p50_ms"] / best_fp32_p50, 3)
        else:
            row["error"] = peer.get("error", "not timed")
        rows[name] = row
    return rows


def seq_section(work: Path, latency: Mapping[str, Json], load: Json, peers_report: Json | None, seq: int) -> Json:
    variants, best_fp32 = variant_rows(work, latency)
    section: Json = {"variants": variants, "best_fp32": best_fp32, "load_during_timing": load}
    if peers_report is not None:
        section["peers"] = peer_rows(latency, peers_report, latency[best_fp32]["p50_ms"], seq)
    return section


def chosen_int8_variant(result: Json) -> str:
    """Sagebox's chosen INT8 on this machine, as a server loads it: the INT8 variant of the runtime that
    infra/data/cpu_kinds.json prefers for this CPU's kind (container/cpu_kind.py, from the flags in the results),
    when measured in this run, else `result["default_int8"]` (the fallback every CPU loads). The table is what a
    build measured elsewhere; this machine's own build may override its kind (sagebox/pipeline/quantize/choose.py)."""
    from container.cpu_kind import kind_of
    from infra.catalog import int8_runtime_preferences

    flags = [flag for flag, present in result.get("machine", {}).get("flags", {}).items() if present]
    runtime = int8_runtime_preferences()[kind_of(flags)].runtime
    measured = result.get("variants", {})
    for v in VARIANTS:
        if v.precision == "int8" and v.name in measured and RUNTIME_OF[v.backend] == runtime:
            return v.name if v.backend != "onnxruntime" else str(result["default_int8"])
    return str(result["default_int8"])


def peer_checks(result: Json) -> Json:
    """Per seq: Sagebox's chosen INT8 over the fastest INT8 peer (target <= 1.0); at 384 tokens: the chosen INT8
    over the fastest Sagebox FP32 (target <= 0.35). Each seq section gets its own "checks"; the flat ones (seq in
    the name) are returned for result["checks"]."""
    chosen = chosen_int8_variant(result)
    flat: Json = {}
    for seq, section in result.get("latency_by_seq", {}).items():
        rows = section["variants"]
        own: Json = {}
        peers = section.get("peers")
        if peers is not None:
            peer = fastest(peers, int8_peers())
            if peer is None:
                own["sagebox_int8_over_fastest_peer_int8_p50"] = {
                    "value": None,
                    "target": f"<= {TARGET_OVER_PEER_INT8}",
                    "passed": False,
                    "sagebox": chosen,
                    "peer": None,
                    "note": "no INT8 peer was timed",
                }
            else:
                ratio = rows[chosen]["p50_ms"] / peers[peer]["p50_ms"]
                own["sagebox_int8_over_fastest_peer_int8_p50"] = {
                    "value": round(ratio, 3),
                    "target": f"<= {TARGET_OVER_PEER_INT8}",
                    "passed": ratio <= TARGET_OVER_PEER_INT8,
                    "sagebox": chosen,
                    "peer": peer,
                }
        if seq == "384":
            best = section["best_fp32"]
            ratio = rows[chosen]["p50_ms"] / rows[best]["p50_ms"]
            own["int8_over_fp32_p50_at_384"] = {
                "value": round(ratio, 3),
                "target": f"<= {TARGET_INT8_OVER_FP32_AT_384}",
                "passed": ratio <= TARGET_INT8_OVER_FP32_AT_384,
                "int8": chosen,
                "fp32": best,
            }
        section["checks"] = own
        for name, check in own.items():
            flat[name if name.endswith(f"_at_{seq}") else f"{name}_at_{seq}"] = check
    return flat


PeerRunners = Callable[[ModelInputs, int], Mapping[str, Callable[[], object]]]


def latency_runners(
    work: Path, names: Sequence[str], seq: int, threads: int, peers: PeerRunners | None = None
) -> dict[str, Callable[[], object]]:
    """Zero-argument calls on one full-length feature at `seq`: each Sagebox variant through its serving
    Predictor, then the peers' calls (given the same feature as batch-1 model inputs) when `peers` is given."""
    predictors = {name: Predictor.load(work / name, PredictorOptions(threads=threads)) for name in names}
    any_predictor = next(iter(predictors.values()))
    if seq not in any_predictor.task.buckets:
        raise SageboxError(f"sequence length {seq} is not one of the buckets {any_predictor.task.buckets}")
    feature = any_predictor.task.filler_feature(seq)
    runners: dict[str, Callable[[], object]] = {
        name: partial(p.predict_batch, [feature]) for name, p in predictors.items()
    }
    if peers is not None:
        inputs = {name: np.stack([getattr(feature, name)]) for name in MODEL_INPUTS}
        for name, runner in peers(inputs, seq).items():
            if name in runners:
                raise SageboxError(f"peer {name!r} has the name of a Sagebox variant")
            runners[name] = runner
    return runners


def measure_latency(
    work: Path, names: Sequence[str], seq: int, threads: int, rounds: int, peers: PeerRunners | None = None
) -> dict[str, Json]:
    times = interleaved_latency(latency_runners(work, names, seq, threads, peers), rounds, warmup=3)
    return {name: summarize(ms) for name, ms in times.items()}


def avx2_emulation(work: Path, names: Sequence[str], seq: int, threads: int, rounds: int) -> Json:
    """Re-measure TorchScript variants in a child process whose torch kernels are capped at AVX2."""
    cmd = [sys.executable, "-m", "sagebox.bench.models", "--child-latency", str(work), ",".join(names)]
    cmd += ["--seq", str(seq), "--threads", str(threads), "--rounds", str(rounds)]
    env = {**os.environ, **AVX2_ONLY_ENV}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["child failed"])[-1]}
    result: Json = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def accuracy(
    minilm_folder: Path,
    dev: Path,
    train: Path,
    work: Path,
    batches: int,
    threads: int,
    say: Callable[[str], None],
) -> dict[str, Json]:
    from sagebox.pipeline.quantize.options import fallbacks
    from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize

    results: dict[str, Json] = {}
    combos: tuple[tuple[Backend, Mode], ...] = (
        ("onnxruntime", "dynamic"),
        ("onnxruntime", "static"),
        ("torch", "dynamic"),
        ("torch", "static"),
        ("openvino", "static"),
    )
    for backend, mode in combos:
        name = f"{backend}-{mode}"
        say(f"accuracy: sagebox quantize on the MiniLM demo model, {name}")
        options = QuantizeOptions(backend=backend, mode=mode, calibration_batches=batches)
        request = QuantizeRequest(
            model=minilm_folder,
            out=work / f"minilm-{name}",
            eval_data=dev,
            options=options,
            calibration_data=train,
            max_f1_drop=TARGET_F1_DROP,
            threads=threads,
            # The default recipe is accuracy-driven, as `sagebox quantize` runs it; the others are measured as is.
            fallbacks=fallbacks(options) if (backend, mode) == (DEFAULT_BACKEND, DEFAULT_MODE) else (),
        )
        outcome = run_quantize(request)
        results[name] = {
            "fp32_em": round(outcome.fp32.score.exact_match, 2),
            "fp32_f1": round(outcome.fp32.score.f1, 2),
            "int8_em": round(outcome.int8.score.exact_match, 2),
            "int8_f1": round(outcome.int8.score.f1, 2),
            "f1_drop": round(outcome.gate.f1_drop, 2),
            "gate_passed": outcome.gate.passed,
            "questions": outcome.fp32.score.total,
            "calibration_batches": outcome.int8_manifest.quantization.calibration_batches
            if outcome.int8_manifest.quantization
            else 0,
            "fp32_bytes": outcome.sizes["fp32"],
            "int8_bytes": outcome.sizes["int8"],
            "attempts": list(outcome.attempts),
            "chosen": outcome.int8_manifest.quantization.model_dump() if outcome.int8_manifest.quantization else None,
        }
    return results


def chosen_default_variant(result: Json) -> str:
    """The latency variant matching the recipe the accuracy-driven default kept on the demo model."""
    row = result.get("accuracy_minilm", {}).get("variants", {}).get(f"{DEFAULT_BACKEND}-{DEFAULT_MODE}", {})
    chosen = row.get("chosen") or {}
    if chosen.get("reduce_range") and not chosen.get("fp32_op_types"):
        return "int8-onnx-dynamic-7bit"
    return int8_name(DEFAULT_BACKEND, DEFAULT_MODE)


def package_sizes(work: Path, names: Sequence[str], say: Callable[[str], None]) -> dict[str, int]:
    from sagebox.pipeline.package.tarball import package_model_dir

    sizes = {}
    for name in names:
        say(f"packaging {name}")
        sizes[name] = package_model_dir(work / name, work / "tarballs" / f"{name}.tar.gz").bytes
    return sizes


def calibration_feeds(hf_folder: Path, batches: int) -> list[dict[str, np.ndarray]]:
    """Calibration batches from generated SQuAD questions, featurized like the server does."""
    from sagebox.demo.synth_squad import generate
    from sagebox.pipeline.export.servable import buckets_for
    from sagebox.pipeline.load.hf_model import check_model_folder
    from sagebox.pipeline.quantize.calibration import calibration_batches, processor_for

    buckets, _ = buckets_for(check_model_folder(hf_folder))
    processor = processor_for(hf_folder, buckets)
    return calibration_batches(generate(max(batches, 1) * 2, 7, "train"), processor, batches)


def run(args: argparse.Namespace) -> Json:
    from rich.console import Console

    from sagebox.demo.models import bert_base_dims, cache_root, minilm_squad

    err = Console(stderr=True)

    def say(line: str) -> None:
        err.print(f"[dim]{line}[/dim]")

    cache = args.cache_dir or cache_root()
    work: Path = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    before = CpuSnapshot.take()
    hf_folder = args.model_folder or bert_base_dims(cache).folder
    say(f"speed model: {hf_folder}")
    feeds = calibration_feeds(hf_folder, args.calibration_batches)
    build_seconds = build_all(VARIANTS, hf_folder, work, feeds, args.calibration_batches, args.reuse, say)
    peers: Int8Peers | None = None
    if not args.skip_peers:
        peers = Int8Peers(
            work / PEERS_DIR, work / "fp32-onnx-plain" / "model.onnx", hf_folder, feeds, args.threads, say
        )
        peers.build(args.reuse)
    names = [v.name for v in VARIANTS]
    by_seq: Json = {}
    cpus = os.cpu_count() or 1
    for seq in args.seqs:
        loading_start = CpuSnapshot.take()  # the window "load_during_timing" has always had: loading, then rounds
        runners = latency_runners(work, names, seq, args.threads, peers.runners if peers else None)
        say(f"timing {len(runners)} variants and peers x {args.rounds} interleaved rounds (batch 1, seq {seq})")
        rounds_start = CpuSnapshot.take()
        times = interleaved_latency(runners, args.rounds, warmup=3)
        end = CpuSnapshot.take()
        del runners  # free this seq's sessions and compiled peers before the next
        latency = {name: summarize(ms) for name, ms in times.items()}
        section = seq_section(
            work, latency, load_between(loading_start, end, cpus), peers.report() if peers else None, seq
        )
        section["load_during_rounds"] = load_between(rounds_start, end, cpus)  # the timed rounds alone
        by_seq[str(seq)] = section
    primary = by_seq[str(args.seq)]
    best_fp32 = primary["best_fp32"]
    default_int8 = int8_name(DEFAULT_BACKEND, DEFAULT_MODE)
    result: Json = {
        "started_at": started_at,
        "machine": {**cpu_info(), "python": platform.python_version()},
        "setup": {
            "model": f"{hf_folder.name}" if args.model_folder else "BERT-base dims (BertConfig defaults, random init)",
            "hf_folder": str(hf_folder),
            "batch": 1,
            "seq": args.seq,
            "seqs": list(args.seqs),
            "threads": args.threads,
            "rounds": args.rounds,
            "calibration_batches": args.calibration_batches,
            "method": "Predictor.predict_batch on one full-length feature; all variants (and the peers, on the same "
            "feature as batch-1 model inputs) loaded at once and interleaved, starting variant rotated every round",
        },
        # The longest seq's rows (what "seq" names), as before --seqs; every seq's are in "latency_by_seq".
        "variants": primary["variants"],
        "latency_by_seq": by_seq,
        "build_seconds": build_seconds,
        "best_fp32": best_fp32,
        "default_int8": default_int8,
        "load_during_timing": primary["load_during_timing"],
    }
    if peers is not None:
        result["peers_int8"] = peers.report()
    if not args.skip_runtime_checks:
        say("checking the ONNX Runtime serving choices: layer-norm kernels, spin-wait, denormal flushing")
        hidden = int(json.loads((hf_folder / "config.json").read_text()).get("hidden_size", 768))
        result["runtime_checks"] = runtime_checks(work / default_int8, hidden, args.threads)
    if args.avx2_emulation:
        say("re-timing TorchScript variants with torch kernels capped at AVX2 (child process)")
        torch_names = [v.name for v in VARIANTS if v.backend == "torch"]
        result["torch_avx2_emulation"] = avx2_emulation(work, torch_names, args.seq, args.threads, args.rounds)
    if args.package:
        int8_onnx = [
            v.name for v in VARIANTS if v.precision == "int8" and v.backend == "onnxruntime" and v.mode == "dynamic"
        ]
        result["tarball_bytes"] = package_sizes(work, [best_fp32, *int8_onnx], say)
    if not args.skip_accuracy:
        demo = minilm_squad(cache, progress=say)
        result["accuracy_minilm"] = {
            "model": str(demo.folder),
            "training": demo.info.get("training"),
            "eval_data": str(demo.dev_data),
            "calibration_data": str(demo.train_data),
            "variants": accuracy(
                demo.folder, demo.dev_data, demo.train_data, work, args.calibration_batches, args.threads, say
            ),
        }
    if not args.skip_embeddings:
        from sagebox.bench.embeddings import minilm_embeddings

        result["embeddings_minilm"] = minilm_embeddings(work, args.threads, args.rounds, say)
    result["fastest_int8_at_equal_accuracy"] = fastest_at_equal_accuracy(result)
    default_int8 = chosen_default_variant(result)
    result["default_int8"] = default_int8
    result["checks"] = {**checks(result, best_fp32, default_int8), **peer_checks(result)}
    result["load_whole_run"] = load_between(before, CpuSnapshot.take(), os.cpu_count() or 1)
    result["notes"] = notes(result)
    return result


def notes(result: Json) -> list[str]:
    """Plain-language caveats derived from the numbers, so the JSON can be read on its own."""
    machine = result["machine"]
    out = [
        f"INT8 dot-product support on this CPU: {machine['int8_dot_product']}. INT8 speed-ups depend on it: "
        "VNNI does 4 int8 multiply-adds per 32-bit lane in one instruction; AVX2 needs three instructions.",
        f"other processes kept {result['load_during_timing']['cpus_busy_others']} CPU(s) busy on average "
        "while timing; ratios come from interleaved rounds, so load affects both sides alike.",
    ]
    emulation = result.get("torch_avx2_emulation", {})
    if "int8_over_fp32_p50" in emulation:
        ratios = ", ".join(f"{k} {v}" for k, v in emulation["int8_over_fp32_p50"].items())
        out.append(
            "with torch kernels capped at AVX2 (ATen/oneDNN/MKL/FBGEMM env switches), TorchScript INT8/FP32 "
            f"P50 was {ratios}: expect ratios near that on AVX2-only CPUs; ONNX Runtime has no such switch."
        )
    peers = result.get("peers_int8", {}).get("peers", {})
    for name, peer in peers.items():
        if "error" in peer:
            out.append(f"INT8 peer {name} has no timing: {peer['error']}")
    chosen = chosen_int8_variant(result)
    if peers and chosen != result["default_int8"]:
        out.append(f"Sagebox's INT8 on this CPU is {chosen} (marked for its flags), not {result['default_int8']}.")
    accuracy_rows = result.get("accuracy_minilm", {}).get("variants", {})
    failed = [name for name, row in accuracy_rows.items() if not row["gate_passed"]]
    if failed:
        out.append(
            f"the accuracy gate (F1 drop <= {TARGET_F1_DROP}) refused {', '.join(failed)} on the demo model; "
            "they are still built and timed above, but sagebox quantize would not keep them."
        )
    return out


def passed(variant: Variant, accuracy_rows: Json) -> bool:
    """Whether the gate kept this exact recipe (an accuracy-driven row passes only for the recipe it chose)."""
    row = accuracy_rows.get(f"{variant.backend}-{variant.mode}", {})
    if not row.get("gate_passed", False):
        return False
    chosen = row.get("chosen") or {}
    if not chosen:
        return True
    return bool(chosen.get("reduce_range")) == variant.reduce_range and not chosen.get("fp32_op_types")


def fastest_at_equal_accuracy(result: Json) -> str | None:
    """The fastest INT8 variant whose MiniLM F1 passed the gate (any INT8 variant if accuracy was skipped)."""
    accuracy_rows = result.get("accuracy_minilm", {}).get("variants", {})
    candidates = [v.name for v in VARIANTS if v.precision == "int8" and (not accuracy_rows or passed(v, accuracy_rows))]
    return min(candidates, key=lambda n: result["variants"][n]["p50_ms"]) if candidates else None


def checks(result: Json, best_fp32: str, default_int8: str) -> Json:
    rows = result["variants"]
    chosen = chosen_int8_variant(result)  # the build a server on this CPU loads
    latency_ratio = rows[chosen]["p50_ms"] / rows[best_fp32]["p50_ms"]
    size_ratio = rows[default_int8]["model_file_bytes"] / rows[best_fp32]["model_file_bytes"]
    out: Json = {
        "int8_p50_over_fp32_p50": {
            "value": round(latency_ratio, 3),
            "target": f"<= {TARGET_LATENCY_RATIO}",
            "passed": latency_ratio <= TARGET_LATENCY_RATIO,
            "int8": chosen,
            "fp32": best_fp32,
        },
        "int8_size_over_fp32_size": {
            "value": round(size_ratio, 3),
            "target": f"<= {TARGET_SIZE_RATIO}",
            "passed": size_ratio <= TARGET_SIZE_RATIO,
            "of": "model file",
        },
    }
    tarballs = result.get("tarball_bytes")
    if tarballs:
        tar_ratio = tarballs[default_int8] / tarballs[best_fp32]
        out["int8_tarball_over_fp32_tarball"] = {
            "value": round(tar_ratio, 3),
            "target": f"<= {TARGET_SIZE_RATIO}",
            "passed": tar_ratio <= TARGET_SIZE_RATIO,
        }
    accuracy_section = result.get("accuracy_minilm")
    if accuracy_section:
        key = f"{DEFAULT_BACKEND}-{DEFAULT_MODE}"
        row = accuracy_section["variants"][key]
        out["minilm_int8_f1_within_1_of_fp32"] = {
            "value": row["f1_drop"],
            "fp32_f1": row["fp32_f1"],
            "int8_f1": row["int8_f1"],
            "target": f"F1 drop <= {TARGET_F1_DROP}",
            "passed": row["f1_drop"] <= TARGET_F1_DROP,
            "variant": key,
        }
    return out


def print_tables(result: Json) -> None:
    from rich.table import Table

    from sagebox.cli.common import console as make_console

    console = make_console()
    for seq in sorted(result.get("latency_by_seq", {}), key=int):
        console.print(latency_table(result, seq))
    peers_report = result.get("peers_int8")
    if peers_report:
        console.print(peers_table(peers_report))
    accuracy_section = result.get("accuracy_minilm")
    if accuracy_section:
        acc = Table(title="MiniLM demo model, held-out dev split (through sagebox quantize)")
        for column in ("backend-mode", "FP32 EM", "FP32 F1", "INT8 EM", "INT8 F1", "F1 drop", "gate"):
            acc.add_column(column, justify="left" if column == "backend-mode" else "right")
        for name, row in accuracy_section["variants"].items():
            acc.add_row(
                name,
                f"{row['fp32_em']:.2f}",
                f"{row['fp32_f1']:.2f}",
                f"{row['int8_em']:.2f}",
                f"{row['int8_f1']:.2f}",
                f"{row['f1_drop']:+.2f}",
                "pass" if row["gate_passed"] else "FAIL",
            )
        console.print(acc)
    print_embeddings(result)
    summary = Table(title="Acceptance checks")
    for column in ("check", "value", "target", "result"):
        summary.add_column(column)
    for name, row in result["checks"].items():
        verdict = "[green]pass[/green]" if row["passed"] else "[red]FAIL[/red]"
        if "peer" in row:
            name = f"{name} ({row['sagebox']} / {row['peer']})"
        elif "int8" in row and "fp32" in row:
            name = f"{name} ({row['int8']} / {row['fp32']})"
        summary.add_row(name, str(row["value"]), row["target"], verdict)
    console.print(summary)
    machine, load = result["machine"], result["load_during_timing"]
    console.print(
        f"machine: {machine['model']}; INT8 dot product: {machine['int8_dot_product']}; other processes kept "
        f"{load['cpus_busy_others']} CPU(s) busy on average while timing"
    )
    checks = result.get("runtime_checks")
    if checks and "error" not in checks["runtime_options"]:
        kernels = checks["layer_norm_kernels"][0]
        options = checks["runtime_options"]["p50_over_default"]
        console.print(
            f"ONNX Runtime choices: SkipLayerNormalization {kernels['p50_us']['skip_layer_norm']} us vs Add + "
            f"LayerNormalization {kernels['p50_us']['add_then_layer_norm']} us at {kernels['shape']} (1 thread); "
            "padded INT8 call vs the default (spin-wait on, denormals flushed): "
            f"spin off x{options['spin_off_flush_on']}, no flush x{options['spin_on_flush_off']}, "
            f"neither x{options['spin_off_flush_off']}"
        )
    for line in result.get("notes", [])[2:]:
        console.print(f"note: {line}")


def latency_table(result: Json, seq: str) -> Any:
    """One seq: Sagebox's variants, then the peers, with P50/P90 and the ratio to Sagebox's fastest FP32."""
    from rich.table import Table

    setup, section = result["setup"], result["latency_by_seq"][seq]
    chosen = chosen_int8_variant(result)
    table = Table(
        title=f"{setup['model']}, batch 1, seq {seq}, {setup['threads']} threads, {setup['rounds']} interleaved "
        f"rounds (fastest Sagebox FP32: {section['best_fp32']}; * Sagebox's chosen INT8)"
    )
    for column in ("variant", "by", "P50 ms", "P90 ms", "/best FP32", "/same-backend FP32", "model MB"):
        table.add_column(column, justify="left" if column in {"variant", "by"} else "right")
    for name, row in section["variants"].items():
        table.add_row(
            f"{name} *" if name == chosen else name,
            "sagebox",
            f"{row['p50_ms']:.1f}",
            f"{row['p90_ms']:.1f}",
            f"{row['ratio_to_best_fp32_p50']:.3f}",
            f"{row['ratio_to_same_backend_fp32_p50']:.3f}",
            f"{row['model_file_bytes'] / 1e6:.1f}",
        )
    for name, row in section.get("peers", {}).items():
        if "p50_ms" not in row:
            table.add_row(name, "peer", "-", "-", "-", "-", "-")
            continue
        size = row.get("model_file_bytes")
        table.add_row(
            name,
            "peer",
            f"{row['p50_ms']:.1f}",
            f"{row['p90_ms']:.1f}",
            f"{row['ratio_to_best_fp32_p50']:.3f}",
            "",
            f"{size / 1e6:.1f}" if size else "",
        )
    return table


def peers_table(report: Json) -> Any:
    """Each peer's build and compile seconds (build: blank when reused), or why it failed."""
    from rich.table import Table

    table = Table(title=f"INT8 peers: build and compile seconds ({report['calibration_batches']} calibration batches)")
    for column in ("peer", "precision", "build s", "compile s", "note"):
        table.add_column(column, justify="right" if column.endswith(" s") else "left")
    for name, row in report["peers"].items():
        build = "reused" if row["reused"] else "" if row["build_seconds"] is None else f"{row['build_seconds']:.1f}"
        compiled = ", ".join(f"{k}: {v:.1f}" for k, v in row["compile_seconds"].items())
        table.add_row(name, row["precision"], build, compiled, row.get("error", ""))
    return table


def print_embeddings(result: Json) -> None:
    from rich.table import Table

    from sagebox.cli.common import console as make_console

    embeddings = result.get("embeddings_minilm")
    if not embeddings or "model_call" not in embeddings:
        return
    checks_text = "; ".join(
        f"{c['metric']} FP32 {c['fp32']:.4f} INT8 {c['int8']:.4f}" for c in embeddings["gate"]["checks"]
    )
    table = Table(title=f"all-MiniLM-L6-v2 embeddings, model call (gate: {checks_text})")
    for column in ("request", "tokens", "FP32 P50 ms", "INT8 P50 ms", "INT8/FP32"):
        table.add_column(column, justify="left" if column == "request" else "right")
    for name, row in embeddings["model_call"].items():
        table.add_row(
            name,
            str(row["tokens"]),
            f"{row['fp32']['p50_ms']:.2f}",
            f"{row['int8']['p50_ms']:.2f}",
            f"{row['int8_over_fp32_p50']:.3f}",
        )
    console = make_console()
    console.print(table)
    machine = result["machine"]
    flags = ", ".join(flag for flag, present in machine["flags"].items() if present) or "none of interest"
    console.print(f"machine: {machine['model']}; flags: {flags}; INT8 dot product: {machine['int8_dot_product']}")


def write_json(result: Json, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out)


def runtime_checks(int8_dir: Path, hidden: int, threads: int) -> Json:
    """The measurements behind container/handlers/onnx.py's settings, on this machine."""
    from sagebox.bench import runtime_checks as checks

    buckets = load_verified(int8_dir).sequence_buckets
    bucket = 128 if 128 in buckets else buckets[0]
    return {
        "layer_norm_kernels": [
            checks.layer_norm_kernels(bucket, hidden, 1),
            checks.layer_norm_kernels(bucket, hidden, threads),
        ],
        "runtime_options": checks.runtime_options_in_child(int8_dir, bucket, threads),
    }


def child_latency(args: argparse.Namespace) -> int:
    work, names = Path(args.child_latency[0]), args.child_latency[1].split(",")
    latency = measure_latency(work, names, args.seq, args.threads, args.rounds)
    fp32 = [n for n in names if n.startswith("fp32")]
    int8 = [n for n in names if n.startswith("int8")]
    out: Json = {"env": AVX2_ONLY_ENV, "variants": latency}
    if fp32 and int8:
        base = min(latency[n]["p50_ms"] for n in fp32)
        out["int8_over_fp32_p50"] = {n: round(latency[n]["p50_ms"] / base, 3) for n in int8}
    print(json.dumps(out))
    return 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from container.env import available_cpus

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=state_dir() / "bench" / "models.json")
    p.add_argument("--work-dir", type=Path, default=state_dir() / "bench" / "work")
    p.add_argument("--cache-dir", type=Path, help="demo model cache (default $SAGEBOX_CACHE_DIR or ~/.cache/sagebox)")
    p.add_argument("--model-folder", type=Path, help="speed model HF folder (default: the BERT-base dims demo)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument(
        "--seqs",
        type=parse_seqs,
        help=f"sequence lengths to time, comma-separated (default {','.join(map(str, DEFAULT_SEQS))})",
    )
    p.add_argument("--seq", type=int, help="time one sequence length only (the same as --seqs N)")
    p.add_argument("--threads", type=int, default=available_cpus())
    p.add_argument("--calibration-batches", type=int, default=100)
    p.add_argument("--reuse", action="store_true", help="reuse verified artifacts left in --work-dir")
    p.add_argument("--skip-accuracy", action="store_true", help="no MiniLM EM/F1 section")
    p.add_argument(
        "--skip-embeddings",
        action="store_true",
        help="no all-MiniLM-L6-v2 embeddings section (INT8/FP32 model call, cosine, recall@10)",
    )
    p.add_argument(
        "--only-embeddings",
        action="store_true",
        help="only the all-MiniLM-L6-v2 embeddings section (no BERT-base speed or MiniLM QA sections)",
    )
    p.add_argument("--no-package", dest="package", action="store_false", help="skip the model.tar.gz sizes")
    p.add_argument("--no-avx2-emulation", dest="avx2_emulation", action="store_false")
    p.add_argument("--skip-runtime-checks", action="store_true", help="no layer-norm / spin / denormal section")
    p.add_argument(
        "--skip-peers",
        action="store_true",
        help="no OpenVINO / PyTorch 2 export INT8 peers (sagebox/bench/peers_int8.py)",
    )
    p.add_argument("--child-latency", nargs=2, metavar=("WORK", "NAMES"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.seq is not None and args.seqs is not None:
        p.error("give --seq or --seqs, not both")
    args.seqs = [args.seq] if args.seq is not None else args.seqs or list(DEFAULT_SEQS)
    args.seq = max(args.seqs)  # the seq of the top-level "variants" rows, the AVX2 emulation and the child
    return args


def parse_seqs(text: str) -> list[int]:
    """ "128,384" -> [128, 384]: positive, sorted, each once."""
    try:
        seqs = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None
    if not seqs or seqs[0] < 1:
        raise argparse.ArgumentTypeError(f"sequence lengths must be positive integers: {text!r}")
    return seqs


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child_latency:
        return child_latency(args)
    try:
        result = run_embeddings_only(args) if args.only_embeddings else run(args)
    except SageboxError as exc:
        print(f"bench_models: error: {exc}", file=sys.stderr)
        return 1
    write_json(result, args.out)
    if args.only_embeddings:
        print_embeddings(result)
    else:
        print_tables(result)
    print(f"results: {args.out}")
    return 0


def run_embeddings_only(args: argparse.Namespace) -> Json:
    from rich.console import Console

    from sagebox.bench.embeddings import minilm_embeddings

    err = Console(stderr=True)
    started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    before = CpuSnapshot.take()
    section = minilm_embeddings(args.work_dir, args.threads, args.rounds, lambda line: err.print(f"[dim]{line}[/dim]"))
    return {
        "started_at": started_at,
        "machine": {**cpu_info(), "python": platform.python_version()},
        "setup": {"threads": args.threads, "rounds": args.rounds},
        "embeddings_minilm": section,
        "load_whole_run": load_between(before, CpuSnapshot.take(), os.cpu_count() or 1),
    }


if __name__ == "__main__":
    sys.exit(main())
