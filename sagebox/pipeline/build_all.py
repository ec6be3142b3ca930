"""Every artifact from one Hugging Face model (a folder or a Hub id), any task: FP32, gated INT8 and Neuron model
directories, each packaged as a SageMaker model.tar.gz in the layout the CDK targets expect
(`<out>/<variant>/model.tar.gz`). A decoder LLM (text-generation: a causal LM folder, Hub id or GGUF file) gets its
FP32 directory, checked against transformers and reported with its perplexity on held-out text, and its INT8 directory,
kept when the serving engine finds it close to FP32 (perplexity ratio, greedy agreement: generation_flow.py).

Steps whose output is already there, verifies and was built from the same model (task, name, pinned revision) are
skipped, so a rerun only redoes what changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from container.manifest import SourceSpec
from sagebox.pipeline.export.artifact import current
from sagebox.pipeline.export.servable import ModelSource, source_spec
from sagebox.pipeline.gate.accuracy_gate import GateFailed
from sagebox.pipeline.gate.generation_limits import GenerationLimits
from sagebox.pipeline.gate.task_gate import DEFAULT_MAX_DROP, DEFAULT_MIN_COSINE
from sagebox.pipeline.load.hf_task import TaskInfo


@dataclass(frozen=True)
class Artifacts:
    model_dirs: dict[str, Path]  # variant -> verified model directory
    tarballs: dict[str, Path]  # variant -> model.tar.gz
    quantize_report: dict[str, object]
    task: str = "question-answering"
    source: SourceSpec | None = None


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
    generation_limits: GenerationLimits | None = None,
    openvino: bool = True,
) -> Artifacts:
    from sagebox.pipeline.load.hf_task import detect_task
    from sagebox.pipeline.quantize.options import QuantizeOptions, alternatives_for, fallbacks
    from sagebox.pipeline.quantize_flow import REPORT_NAME, QuantizeRequest, run_quantize

    source = source or ModelSource.resolve(model, say)
    info = detect_task(source.folder, task)
    spec = source_spec(info, source)
    for note in info.notes:
        say(note)
    if info.task == "text-generation":
        return _build_generation(source, info, spec, work_dir, out_dir, generation_limits or GenerationLimits(), say)
    quantized = work_dir / "quantized"
    int8 = current(quantized / "int8", info.task, spec)
    wanted = {"openvino"} if openvino else set()
    if not (
        current(quantized / "fp32", info.task, spec)
        and int8
        and wanted <= {b.runtime for b in int8.alternatives} | {int8.runtime}
    ):
        outcome = run_quantize(
            QuantizeRequest(
                model=source.folder,
                out=quantized,
                eval_data=eval_data,
                calibration_data=calibration_data,
                threads=threads,
                fallbacks=fallbacks(QuantizeOptions()),
                alternatives=alternatives_for(QuantizeOptions()) if openvino else (),
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
        if not current(model_dirs["neuron"], info.task, spec):
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
    source: ModelSource,
    info: TaskInfo,
    spec: SourceSpec,
    work_dir: Path,
    out_dir: Path,
    limits: GenerationLimits,
    say: Callable[[str], None],
) -> Artifacts:
    """A decoder LLM (generation_flow.py): the FP32 directory with its perplexity, packaged first (an INT8 model
    that fails its gate leaves it deployable), then the gated INT8 directory and its package. A refused INT8 model
    leaves no package either: an older `<out>/int8/model.tar.gz` is deleted."""
    from sagebox.pipeline.generation_flow import NEURON_NOTE, fp32_step, int8_step

    say(NEURON_NOTE)
    fp32_dir, fp32_manifest, report = fp32_step(source, info, spec, work_dir, say)
    tarballs = _package({"fp32": fp32_dir}, out_dir, say)
    try:
        int8_dir, report = int8_step(fp32_dir, fp32_manifest, info, spec, work_dir, report, limits, say)
    except GateFailed:
        stale = out_dir / "int8" / "model.tar.gz"
        stale.unlink(missing_ok=True)
        if stale.parent.is_dir() and not any(stale.parent.iterdir()):
            stale.parent.rmdir()
        raise
    tarballs |= _package({"int8": int8_dir}, out_dir, say)
    return Artifacts({"fp32": fp32_dir, "int8": int8_dir}, tarballs, report, info.task, spec)
