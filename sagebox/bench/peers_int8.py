"""INT8 peers beside Sagebox in the BERT-base latency benchmark (sagebox/bench/models.py): other toolchains' INT8
(and FP32) recipes for the same model, built from Sagebox's own FP32 artifacts, fed the same inputs (the serving
task's full-length filler feature, batch 1, int64 input_ids / attention_mask / token_type_ids), timed in the same
interleaved rounds as Sagebox's variants, with the same thread count. None of them is Sagebox; none is served.

1. openvino-nncf-dynamic: OpenVINO 2026.4 reads Sagebox's plain FP32 ONNX graph (`<work>/fp32-onnx-plain/model.onnx`,
   no offline fusion: OpenVINO fuses on its own) and NNCF quantizes it after training with
   `nncf.quantize(model, nncf.Dataset(feeds), model_type=nncf.ModelType.TRANSFORMER,
   preset=nncf.QuantizationPreset.MIXED, subset_size=100)`, where `feeds` are the bench's own calibration batches
   (generated SQuAD questions featurized as the server does: `calibration_feeds(hf_folder, 100)` in models.py).
   Saved as IR with FP32 weights kept (`ov.save_model(..., compress_to_fp16=False)`) in
   `<work>/peers/openvino-nncf-int8/`; compiled once for "CPU" with {"INFERENCE_NUM_THREADS": threads,
   "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}, shapes left dynamic ([?, ?] on every input).
2. openvino-nncf-static: the same IR, every input reshaped to a static [1, seq], compiled once per seq with the same
   configuration.
3. openvino-fp32: the FP32 ONNX graph in OpenVINO (saved as IR, weights FP32, `<work>/peers/openvino-fp32/`), same
   configuration, dynamic shapes.
4. pt2e-int8: PyTorch 2 export static INT8. `torch.export.export` of the Hugging Face task module
   (`load_qa_module(hf_folder)`: input_ids, attention_mask, token_type_ids -> start, end logits) with the sequence
   dimension dynamic (2 .. max_position_embeddings); torchao 0.18's `X86InductorQuantizer` with
   `get_default_x86_inductor_quantization_config()` (static, per-channel symmetric INT8 weights, per-tensor
   affine UINT8 activations), `prepare_pt2e`, one forward pass per calibration batch (the same feeds, all of them),
   `convert_pt2e`; the converted graph is exported again and saved (`torch.export.save`) as
   `<work>/peers/pt2e-int8/model.pt2`. For timing it is loaded, then `torch.compile(module, dynamic=False)`
   (inductor) once per seq with `torch._inductor.config.freezing = True` (torchao's recipe: the INT8 weight packing
   and the oneDNN qlinear fusions are freezing passes), called under `torch.no_grad()`, `torch.set_num_threads`
   = threads.
5. pt2e-fp32: the same export without quantization (`<work>/peers/pt2e-fp32/model.pt2`), compiled the same way.

Each artifact is built once; with `reuse` an artifact whose recipe stamp (`recipe.json`: the source's size and
modification time, the calibration batch count, the library versions) matches is loaded instead. Build seconds
(when built here) and compile seconds (per seq for static shapes, once for dynamic ones; a torch compile's seconds
include its first call) are reported. A peer that fails to build or compile becomes one line in the results
(`{"error": ...}`), never the run's end.

Runners are zero-argument callables: OpenVINO `request.infer(inputs)` on one infer request per compiled model
(outputs copied to numpy); torch: tensors made from the same numpy arrays, the compiled module, outputs to numpy.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

Json = dict[str, Any]
Runner = Callable[[], object]
Feeds = Sequence[Mapping[str, np.ndarray]]

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
NNCF_SUBSET_SIZE = 100
PEERS_DIR = "peers"  # under the bench's work directory
RECIPE_FILE = "recipe.json"
RECIPE_VERSION = 1

# The artifacts under <work>/peers/ (the two NNCF peers share one).
OV_INT8 = "openvino-nncf-int8"
OV_FP32 = "openvino-fp32"
PT2E_INT8 = "pt2e-int8"
PT2E_FP32 = "pt2e-fp32"


@dataclass(frozen=True)
class Peer:
    name: str
    precision: Literal["fp32", "int8"]
    engine: Literal["openvino", "pt2e"]
    artifact: str  # the directory under <work>/peers/ it is built into
    shapes: Literal["dynamic", "static"]  # static: compiled once per seq
    detail: str


PEERS = (
    Peer(
        "openvino-nncf-dynamic",
        "int8",
        "openvino",
        OV_INT8,
        "dynamic",
        "OpenVINO, NNCF PTQ (TRANSFORMER, MIXED, subset_size 100) of the plain FP32 ONNX, dynamic shapes",
    ),
    Peer(
        "openvino-nncf-static",
        "int8",
        "openvino",
        OV_INT8,
        "static",
        "the same NNCF IR reshaped to a static [1, seq]",
    ),
    Peer("openvino-fp32", "fp32", "openvino", OV_FP32, "dynamic", "OpenVINO, the plain FP32 ONNX, dynamic shapes"),
    Peer(
        "pt2e-int8",
        "int8",
        "pt2e",
        PT2E_INT8,
        "static",
        "torch.export + torchao X86InductorQuantizer (default config) static INT8, torch.compile inductor, freezing",
    ),
    Peer("pt2e-fp32", "fp32", "pt2e", PT2E_FP32, "static", "torch.export FP32, torch.compile inductor, freezing"),
)
PEER_NAMES = tuple(p.name for p in PEERS)


def openvino_config(threads: int) -> dict[str, Any]:
    return {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}


def int8_peers(peers: Sequence[Peer] = PEERS) -> list[str]:
    return [p.name for p in peers if p.precision == "int8"]


def fastest(latency: Mapping[str, Mapping[str, Any]], names: Sequence[str]) -> str | None:
    """The name with the lowest P50 among those measured (a peer that failed has no row, or no p50_ms)."""
    timed = [n for n in names if "p50_ms" in latency.get(n, {})]
    return min(timed, key=lambda n: latency[n]["p50_ms"]) if timed else None


# --- recipe stamps (reuse only what was built from the same source, the same way) -------------------------------------


def source_stamp(path: Path) -> list[list[Any]]:
    """Name, size and modification time of a file, or of every file directly in a folder."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    return [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def recipe(artifact: str, source: Path, calibration_batches: int, versions: Mapping[str, str]) -> Json:
    return {
        "version": RECIPE_VERSION,
        "artifact": artifact,
        "source": str(source),
        "source_files": source_stamp(source),
        "calibration_batches": calibration_batches,
        "libraries": dict(versions),
    }


def reusable(out: Path, wanted: Json) -> bool:
    try:
        return bool(json.loads((out / RECIPE_FILE).read_text()) == wanted)
    except (OSError, ValueError):
        return False


def build_into(out: Path, wanted: Json, build: Callable[[Path], object]) -> float:
    """Build into a fresh temporary folder, stamp it, then put it in place; seconds taken."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    started = time.monotonic()
    try:
        build(tmp)
        (tmp / RECIPE_FILE).write_text(json.dumps(wanted, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    seconds = time.monotonic() - started
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return round(seconds, 1)


# --- OpenVINO ---------------------------------------------------------------------------------------------------------


def openvino_versions() -> dict[str, str]:
    import nncf
    import openvino as ov

    return {"openvino": ov.__version__, "nncf": nncf.__version__}


def build_openvino_fp32(onnx: Path, out: Path) -> None:
    import openvino as ov

    ov.save_model(ov.Core().read_model(onnx), out / "model.xml", compress_to_fp16=False)


def build_openvino_nncf(onnx: Path, feeds: Feeds, out: Path) -> None:
    import nncf
    import openvino as ov

    model = ov.Core().read_model(onnx)
    quantized = nncf.quantize(
        model,
        nncf.Dataset([dict(feed) for feed in feeds]),
        model_type=nncf.ModelType.TRANSFORMER,
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=NNCF_SUBSET_SIZE,
    )
    ov.save_model(quantized, out / "model.xml", compress_to_fp16=False)


def openvino_request(xml: Path, threads: int, static_seq: int | None = None) -> Any:
    """An infer request on the IR compiled for "CPU" (every input reshaped to [1, static_seq] when given)."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(xml)
    if static_seq is not None:
        model.reshape({port.get_any_name(): ov.PartialShape([1, static_seq]) for port in model.inputs})
    return core.compile_model(model, "CPU", openvino_config(threads)).create_infer_request()


# --- PyTorch 2 export -------------------------------------------------------------------------------------------------


def torch_versions() -> dict[str, str]:
    import torch
    import torchao

    return {"torch": torch.__version__, "torchao": torchao.__version__}


def max_positions(hf_folder: Path) -> int:
    return int(json.loads((hf_folder / "config.json").read_text()).get("max_position_embeddings", 512))


def _tensors(inputs: Mapping[str, np.ndarray]) -> tuple[Any, ...]:
    import torch

    return tuple(torch.from_numpy(np.ascontiguousarray(inputs[name])) for name in INPUT_NAMES)


def _export(module: Any, example: Mapping[str, np.ndarray], longest: int) -> Any:
    import torch

    seq = torch.export.Dim("seq", min=2, max=longest)
    with torch.no_grad():
        return torch.export.export(module, _tensors(example), dynamic_shapes={name: {1: seq} for name in INPUT_NAMES})


def build_pt2e_fp32(hf_folder: Path, example: Mapping[str, np.ndarray], out: Path) -> None:
    import torch

    from sagebox.pipeline.load.hf_model import load_qa_module

    program = _export(load_qa_module(hf_folder).eval(), example, max_positions(hf_folder))
    torch.export.save(program, out / "model.pt2")


def build_pt2e_int8(hf_folder: Path, feeds: Feeds, out: Path) -> None:
    import torch
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from sagebox.pipeline.load.hf_model import load_qa_module

    longest = max_positions(hf_folder)
    program = _export(load_qa_module(hf_folder).eval(), feeds[0], longest)
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
    prepared = prepare_pt2e(program.module(), quantizer)
    with torch.no_grad():
        for feed in feeds:
            prepared(*_tensors(feed))
    converted = convert_pt2e(prepared)
    torch.export.save(_export(converted, feeds[0], longest), out / "model.pt2")


def _compile_and_call(compiled: Any, tensors: tuple[Any, ...]) -> int | None:
    """First call (inductor compiles here); how many oneDNN INT8 linear calls the generated code makes, if the
    generated code could be read."""
    try:
        from unittest import mock

        from torch._inductor.graph import GraphLowering
    except ImportError:  # pragma: no cover - torch internals moved
        compiled(*tensors)
        return None
    codes: list[str] = []
    with mock.patch.object(GraphLowering, "save_output_code", codes.append):
        compiled(*tensors)
    return sum(code.count("qlinear_pointwise") for code in codes) if codes else None


def pt2e_runner(module: Any, threads: int, inputs: Mapping[str, np.ndarray]) -> tuple[Runner, int | None]:
    """torch.compile (inductor, freezing, static shapes) of a loaded export, compiled and warmed on `inputs`."""
    import torch
    import torch._inductor.config as inductor_config

    torch.set_num_threads(threads)
    inductor_config.freezing = True
    compiled = torch.compile(module, dynamic=False)
    with torch.no_grad():
        qlinear_calls = _compile_and_call(compiled, _tensors(inputs))

    def run() -> tuple[np.ndarray, ...]:
        with torch.no_grad():
            outputs = compiled(*_tensors(inputs))
        return tuple(o.numpy() for o in outputs)

    return run, qlinear_calls


# --- the peers, built, compiled and reported --------------------------------------------------------------------------


@dataclass
class PeerStatus:
    build_seconds: float | None = None  # None: reused (or not built)
    compile_seconds: dict[str, float] = field(default_factory=dict)  # by seq, or "dynamic"
    qlinear_calls: dict[str, int] = field(default_factory=dict)  # by seq (pt2e only)
    error: str | None = None


def artifact_bytes(folder: Path) -> int:
    """The model files' size (an IR's .xml and .bin, an export's .pt2), 0 when nothing was built."""
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and p.name != RECIPE_FILE)


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


class Int8Peers:
    """Builds (or reuses) the peers' artifacts under `root`, then hands out runners per seq."""

    def __init__(
        self,
        root: Path,
        fp32_onnx: Path,
        hf_folder: Path,
        feeds: Feeds,
        threads: int,
        say: Callable[[str], None] = lambda _: None,
        peers: Sequence[Peer] = PEERS,
    ) -> None:
        self.root = root
        self.fp32_onnx = fp32_onnx
        self.hf_folder = hf_folder
        self.feeds = list(feeds)
        self.threads = threads
        self.say = say
        self.peers = list(peers)
        self.status: dict[str, PeerStatus] = {p.name: PeerStatus() for p in self.peers}
        self.artifact_seconds: dict[str, float | None] = {}
        self._requests: dict[str, Any] = {}  # OpenVINO infer requests by peer
        self._modules: dict[str, Any] = {}

    def _fail(self, artifact: str, exc: BaseException) -> None:
        for peer in self.peers:
            if peer.artifact == artifact:
                self.status[peer.name].error = describe_error(exc)

    def build(self, reuse: bool) -> None:
        jobs: dict[str, tuple[Path, int, Callable[[], dict[str, str]], Callable[[Path], None]]] = {
            OV_INT8: (
                self.fp32_onnx,
                len(self.feeds),
                openvino_versions,
                lambda out: build_openvino_nncf(self.fp32_onnx, self.feeds, out),
            ),
            OV_FP32: (self.fp32_onnx, 0, openvino_versions, lambda out: build_openvino_fp32(self.fp32_onnx, out)),
            PT2E_INT8: (
                self.hf_folder,
                len(self.feeds),
                torch_versions,
                lambda out: build_pt2e_int8(self.hf_folder, self.feeds, out),
            ),
            PT2E_FP32: (
                self.hf_folder,
                0,
                torch_versions,
                lambda out: build_pt2e_fp32(self.hf_folder, self.feeds[0], out),
            ),
        }
        wanted_artifacts = list(dict.fromkeys(p.artifact for p in self.peers))
        for artifact in wanted_artifacts:
            source, batches, versions, job = jobs[artifact]
            out = self.root / artifact
            try:
                wanted = recipe(artifact, source, batches, versions())
                if reuse and reusable(out, wanted):
                    self.say(f"reusing peer {out}")
                    self.artifact_seconds[artifact] = None
                    continue
                self.say(f"building peer artifact {artifact}")
                seconds = build_into(out, wanted, job)
            except Exception as exc:
                self.say(f"peer artifact {artifact} failed: {describe_error(exc)}")
                self._fail(artifact, exc)
                continue
            self.artifact_seconds[artifact] = seconds
            for peer in self.peers:
                if peer.artifact == artifact:
                    self.status[peer.name].build_seconds = seconds

    def _runner(self, peer: Peer, inputs: Mapping[str, np.ndarray], seq: int) -> Runner:
        out = self.root / peer.artifact
        status = self.status[peer.name]
        if peer.engine == "openvino":
            key = str(seq) if peer.shapes == "static" else "dynamic"
            if peer.shapes == "static" or peer.name not in self._requests:
                started = time.monotonic()
                self._requests[peer.name] = openvino_request(
                    out / "model.xml", self.threads, seq if peer.shapes == "static" else None
                )
                status.compile_seconds[key] = round(time.monotonic() - started, 1)
            request = self._requests[peer.name]
            feed = {name: inputs[name] for name in INPUT_NAMES}
            return lambda: request.infer(feed)
        import torch

        if peer.artifact not in self._modules:
            self._modules[peer.artifact] = torch.export.load(out / "model.pt2").module()
        started = time.monotonic()
        runner, qlinear_calls = pt2e_runner(self._modules[peer.artifact], self.threads, inputs)
        status.compile_seconds[str(seq)] = round(time.monotonic() - started, 1)
        if qlinear_calls is not None:
            status.qlinear_calls[str(seq)] = qlinear_calls
        return runner

    def runners(self, inputs: Mapping[str, np.ndarray], seq: int) -> dict[str, Runner]:
        """Zero-argument callables for every peer still standing, compiled for `seq` and called once."""
        out: dict[str, Runner] = {}
        for peer in self.peers:
            status = self.status[peer.name]
            if status.error is not None:
                continue
            self.say(f"compiling peer {peer.name} for seq {seq}")
            try:
                runner = self._runner(peer, inputs, seq)
                runner()
            except Exception as exc:
                self.say(f"peer {peer.name} failed at seq {seq}: {describe_error(exc)}")
                status.error = f"seq {seq}: {describe_error(exc)}"
                continue
            out[peer.name] = runner
        return out

    def report(self) -> Json:
        rows: Json = {}
        for peer in self.peers:
            status = self.status[peer.name]
            row: Json = {
                "precision": peer.precision,
                "engine": peer.engine,
                "shapes": peer.shapes,
                "detail": peer.detail,
                "artifact": str(self.root / peer.artifact),
                "build_seconds": status.build_seconds,
                "reused": peer.artifact in self.artifact_seconds and self.artifact_seconds[peer.artifact] is None,
                "compile_seconds": dict(status.compile_seconds),
            }
            size = artifact_bytes(self.root / peer.artifact)
            if size:
                row["model_file_bytes"] = size
            if status.qlinear_calls:
                row["onednn_qlinear_calls_in_compiled_code"] = dict(status.qlinear_calls)
            if status.error is not None:
                row["error"] = status.error
            rows[peer.name] = row
        return {
            "threads": self.threads,
            "openvino_config": openvino_config(self.threads),
            "calibration_batches": len(self.feeds),
            "peers": rows,
        }
