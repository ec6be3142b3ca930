"""`sagebox build` of a decoder LLM: the FP32 directory with its perplexity, then the INT8 directory, kept only when
it passes its gate (gate/generation_gate.py), both in `<work>` and reported in `<work>/generation-report.json`.

Each step is skipped when its output is current: the FP32 directory verifies and comes from the same model, the
INT8 directory verifies and the report's measurements were taken on exactly its files and the FP32 directory's. A
rerun then judges those measurements against the limits it is given, without running either model again. An INT8
model that fails is deleted (a new one never leaves its staging folder) and the report keeps the failed gate.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from container.manifest import Manifest, SourceSpec
from sagebox.pipeline.export.artifact import current
from sagebox.pipeline.export.servable import ModelSource
from sagebox.pipeline.gate.accuracy_gate import GateFailed
from sagebox.pipeline.gate.generation_gate import GateMeasures, GenerationGate, measure_gate
from sagebox.pipeline.gate.generation_limits import GenerationLimits
from sagebox.pipeline.gate.perplexity import Perplexity
from sagebox.pipeline.load.hf_task import TaskInfo

REPORT_NAME = "generation-report.json"
NEURON_NOTE = (
    "text-generation: FP32 and INT8 models (no Neuron build here: compile the FP32 directory for NeuronCores with "
    "`sagebox compile --model-dir`)"
)

Say = Callable[[str], None]


def read_report(work_dir: Path) -> dict[str, Any]:
    path = work_dir / REPORT_NAME
    try:
        report = json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}
    return report if isinstance(report, dict) else {}


def write_report(work_dir: Path, report: dict[str, Any]) -> None:
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / REPORT_NAME).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")


def fp32_step(
    source: ModelSource, info: TaskInfo, spec: SourceSpec, work_dir: Path, say: Say
) -> tuple[Path, Manifest, dict[str, Any]]:
    """The verified FP32 directory (`<work>/fp32`) and the report, which holds its perplexity on the built-in
    held-out text (measured again only when the directory's files changed; the report starts afresh then)."""
    from sagebox.pipeline.export.generation import build_generation
    from sagebox.pipeline.gate.perplexity import model_dir_perplexity

    model_dir = work_dir / "fp32"
    manifest = current(model_dir, info.task, spec, "fp32")
    if manifest is None:
        say(f"exporting FP32 (torch) text-generation model from {source.folder}")
        manifest = build_generation(source.folder, model_dir, info=info, source=source)
    report = read_report(work_dir)
    if report.get("files") != manifest.files:
        say("measuring perplexity on Sagebox's built-in held-out text")
        perplexity = model_dir_perplexity(model_dir, manifest=manifest)
        report = {"task": info.task, "perplexity": perplexity.summary(), "files": manifest.files}
        write_report(work_dir, report)
    return model_dir, manifest, report


def _reusable(report: dict[str, Any], manifest: Manifest | None) -> GateMeasures | None:
    """The report's measurements when they were taken on the INT8 directory's files, else None."""
    int8, gate = report.get("int8"), report.get("gate")
    if manifest is None or not isinstance(int8, dict) or not isinstance(gate, dict):
        return None
    if int8.get("files") != manifest.files or int8.get("model_dir") is None:
        return None
    try:
        return GateMeasures.from_summary(gate)
    except (KeyError, TypeError, ValueError, AssertionError):
        return None


def _record(report: dict[str, Any], gate: GenerationGate, manifest: Manifest, size: int, kept: Path) -> dict[str, Any]:
    """The report with the INT8 directory (`kept` when it passed, else None) and its gate."""
    quantization = manifest.quantization.model_dump() if manifest.quantization else None
    int8 = {"model_dir": str(kept) if gate.passed else None, "files": manifest.files, "bytes": size}
    return report | {"int8": int8 | {"quantization": quantization}, "gate": gate.to_dict()}


def dir_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def int8_step(
    fp32_dir: Path,
    fp32_manifest: Manifest,
    info: TaskInfo,
    spec: SourceSpec,
    work_dir: Path,
    report: dict[str, Any],
    limits: GenerationLimits,
    say: Say,
) -> tuple[Path, dict[str, Any]]:
    """The gated INT8 directory (`<work>/int8`) and the report with its gate. A failed gate deletes the INT8
    directory, writes the report and raises GateFailed (one line)."""
    from sagebox.pipeline.quantize.generation import build_generation_int8

    model_dir = work_dir / "int8"
    manifest = current(model_dir, info.task, spec, "int8")
    measures = _reusable(report, manifest)
    if manifest is not None and measures is not None:
        gate = GenerationGate(measures, limits)
        report = _record(report, gate, manifest, dir_bytes(model_dir), model_dir)
        write_report(work_dir, report)
        if not gate.passed:
            shutil.rmtree(model_dir, ignore_errors=True)
            raise GateFailed(gate.message())
        return model_dir, report

    fp32_perplexity = Perplexity(**report["perplexity"])

    def check(staging: Path, staged: Manifest) -> None:
        nonlocal report
        say(
            "gating INT8 against FP32 through the serving engine: perplexity on the built-in held-out text, greedy "
            "agreement on the built-in chat prompts"
        )
        measured = measure_gate(
            fp32_dir, staging, fp32_manifest=fp32_manifest, int8_manifest=staged, fp32_perplexity=fp32_perplexity
        )
        gate = GenerationGate(measured, limits)
        report = _record(report, gate, staged, dir_bytes(staging), model_dir)
        write_report(work_dir, report)
        if not gate.passed:
            raise GateFailed(gate.message())

    say("quantizing INT8 (int8 weights per output channel, activations per token; FBGEMM)")
    try:
        build_generation_int8(fp32_dir, model_dir, fp32_manifest=fp32_manifest, check=check)
    except GateFailed:
        shutil.rmtree(model_dir, ignore_errors=True)  # an older INT8 directory, of other FP32 weights
        raise
    return model_dir, report
