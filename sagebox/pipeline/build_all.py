"""Every artifact from one Hugging Face model (a folder or a Hub id), any task: FP32, gated INT8 and Neuron model
directories, each packaged as a SageMaker model.tar.gz in the layout the CDK targets expect
(`<out>/<variant>/model.tar.gz`). A decoder LLM (text-generation: a causal LM folder, Hub id or GGUF file) gets its
FP32 directory only, checked against transformers and reported with its perplexity on held-out text.

Steps whose output is already there, verifies and was built from the same model (task, name, pinned revision) are
skipped, so a rerun only redoes what changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from container.manifest import Manifest, ManifestError, SourceSpec, load_verified
from sagebox.pipeline.export.servable import ModelSource, source_spec
from sagebox.pipeline.gate.accuracy_gate import GateFailed
from sagebox.pipeline.gate.task_gate import DEFAULT_MAX_DROP, DEFAULT_MIN_COSINE
from sagebox.pipeline.load.hf_task import TaskInfo

GENERATION_REPORT = "generation-report.json"
FP32_ONLY = (
    "text-generation: building the FP32 model only (no INT8 build of decoder LLMs yet; compile the FP32 directory for "
    "NeuronCores with `sagebox compile --model-dir`)"
)


@dataclass(frozen=True)
class Artifacts:
    model_dirs: dict[str, Path]  # variant -> verified model directory
    tarballs: dict[str, Path]  # variant -> model.tar.gz
    quantize_report: dict[str, object]
    task: str = "question-answering"
    source: SourceSpec | None = None


def _current(model_dir: Path, info: TaskInfo, source: SourceSpec) -> Manifest | None:
    """The directory's manifest if it verifies and was built from this model for this task, else None."""
    try:
        manifest = load_verified(model_dir)
    except ManifestError:
        return None
    same = (manifest.source.name, manifest.source.revision, manifest.source.architecture) == (
        source.name,
        source.revision,
        source.architecture,
    )
    return manifest if same and manifest.task == info.task else None


def build_all(
    model: str | Path,
    eval_data: Path | None,
    work_dir: Path,
    out_dir: Path,
    *,
    calibration_data: Path | None = None,
    threads: int = 1,
    say: Callable[[str], None] = lambda _: None,
    task: str | None = None,
    max_drop: float = DEFAULT_MAX_DROP,
    min_cosine: float = DEFAULT_MIN_COSINE,
    source: ModelSource | None = None,
    neuron: bool = True,
) -> Artifacts:
    from sagebox.pipeline.load.hf_task import detect_task
    from sagebox.pipeline.quantize.options import QuantizeOptions, fallbacks
    from sagebox.pipeline.quantize_flow import REPORT_NAME, QuantizeRequest, run_quantize

    source = source or ModelSource.resolve(model, say)
    info = detect_task(source.folder, task)
    spec = source_spec(info, source)
    for note in info.notes:
        say(note)
    if info.task == "text-generation":
        return _build_generation(source, info, spec, work_dir, out_dir, say)
    quantized = work_dir / "quantized"
    if not (_current(quantized / "fp32", info, spec) and _current(quantized / "int8", info, spec)):
        outcome = run_quantize(
            QuantizeRequest(
                model=source.folder,
                out=quantized,
                eval_data=eval_data,
                calibration_data=calibration_data,
                threads=threads,
                fallbacks=fallbacks(QuantizeOptions()),
                task=info.task,
                source=source,
                max_f1_drop=max_drop,
                min_cosine=min_cosine,
            ),
            say=say,
        )
        if not outcome.gate.passed:
            raise GateFailed(outcome.gate.message())
    model_dirs = {"fp32": quantized / "fp32", "int8": quantized / "int8"}
    if neuron:
        model_dirs["neuron"] = work_dir / "neuron"
        if not _current(model_dirs["neuron"], info, spec):
            from sagebox.pipeline.compile.neuron import build_neuron

            say("compiling for NeuronCores (neuron_emu, bf16 auto-cast on matmuls)")
            build_neuron(source.folder, model_dirs["neuron"], info=info, source=source)
    tarballs = _package(model_dirs, out_dir, say)
    report_path = quantized / REPORT_NAME
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    return Artifacts(model_dirs, tarballs, report, info.task, spec)


def _package(model_dirs: dict[str, Path], out_dir: Path, say: Callable[[str], None]) -> dict[str, Path]:
    """`<out>/<variant>/model.tar.gz` of each model directory, rewritten only when the directory is newer."""
    from sagebox.pipeline.package.tarball import package_model_dir

    tarballs = {}
    for variant, model_dir in model_dirs.items():
        tarball = out_dir / variant / "model.tar.gz"
        if not tarball.is_file() or tarball.stat().st_mtime < (model_dir / "manifest.json").stat().st_mtime:
            say(f"packaging {variant} as {tarball}")
            package_model_dir(model_dir, tarball)
        tarballs[variant] = tarball
    return tarballs


def _build_generation(
    source: ModelSource, info: TaskInfo, spec: SourceSpec, work_dir: Path, out_dir: Path, say: Callable[[str], None]
) -> Artifacts:
    """A decoder LLM: the verified FP32 directory (`<work>/fp32`), its package, and its perplexity on the built-in
    held-out text (`<work>/generation-report.json`, reused while the directory is unchanged)."""
    from sagebox.pipeline.export.generation import build_generation
    from sagebox.pipeline.gate.perplexity import model_dir_perplexity

    say(FP32_ONLY)
    model_dir = work_dir / "fp32"
    report_path = work_dir / GENERATION_REPORT
    manifest = _current(model_dir, info, spec)
    if manifest is None:
        say(f"exporting FP32 (torch) text-generation model from {source.folder}")
        manifest = build_generation(source.folder, model_dir, info=info, source=source)
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    if report.get("files") != manifest.files:
        say("measuring perplexity on Sagebox's built-in held-out text")
        perplexity = model_dir_perplexity(model_dir, manifest=manifest)
        report = {"task": info.task, "perplexity": perplexity.summary(), "files": manifest.files}
        report_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    tarballs = _package({"fp32": model_dir}, out_dir, say)
    return Artifacts({"fp32": model_dir}, tarballs, report, info.task, spec)
