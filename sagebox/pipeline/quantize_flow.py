"""`sagebox quantize` end to end: FP32 + INT8 artifacts, both evaluated; INT8 kept only if it passes its task's
accuracy gate (sagebox/pipeline/gate/task_eval.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from container.manifest import Manifest, load_verified
from container.predictor import PredictorOptions
from container.tasks import task_for
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import load_squad
from sagebox.pipeline.export.artifact import staged_dir
from sagebox.pipeline.export.servable import ModelSource, build_fp32
from sagebox.pipeline.gate.accuracy_gate import DEFAULT_MAX_F1_DROP, check_max_drop
from sagebox.pipeline.gate.evaluate import Evaluation, evaluate_model_dir
from sagebox.pipeline.gate.task_eval import Judge, judge_for
from sagebox.pipeline.gate.task_gate import DEFAULT_MIN_COSINE, GateLimits
from sagebox.pipeline.load.hf_model import load_task_module
from sagebox.pipeline.load.hf_task import TaskInfo, detect_task
from sagebox.pipeline.quantize.calibration import task_calibration_batches
from sagebox.pipeline.quantize.int8 import build_int8
from sagebox.pipeline.quantize.options import QuantizeOptions

REPORT_NAME = "quantize-report.json"


@dataclass(frozen=True)
class QuantizeRequest:
    model: Path
    out: Path
    # Labelled data for the gate (SQuAD JSON for question answering; see task_eval for the other tasks). None: INT8
    # is compared with FP32 on the calibration data (or built-in text) and no labelled accuracy is measured.
    eval_data: Path | None = None
    options: QuantizeOptions = field(default_factory=QuantizeOptions)
    calibration_data: Path | None = None
    # The most INT8 may lose against FP32, in points of the task's metrics (F1, accuracy, macro-F1, recall@10).
    max_f1_drop: float = DEFAULT_MAX_F1_DROP
    min_cosine: float = DEFAULT_MIN_COSINE
    threads: int = 1
    fuse: bool = True
    # Tried in order after `options` while the accuracy gate fails (see quant_options.fallbacks).
    fallbacks: tuple[QuantizeOptions, ...] = ()
    # Builds for other runtimes (OpenVINO's), each gated like the primary; those that pass join the INT8 directory
    # for the CPU kinds they are faster on (sagebox/pipeline/quantize/choose.py). The primary stays the fallback.
    alternatives: tuple[QuantizeOptions, ...] = ()
    task: str | None = None  # forced task (default: the folder's)
    source: ModelSource | None = None  # where the folder came from (Hub id, pinned revision, license)


@dataclass(frozen=True)
class QuantizeOutcome:
    out: Path
    fp32: Any  # Evaluation (question answering) or TaskEvaluation
    int8: Any
    gate: Any  # GateResult (question answering on labelled data) or TaskGate
    fp32_manifest: Manifest
    int8_manifest: Manifest
    sizes: dict[str, int]
    calibration_note: str
    attempts: tuple[dict[str, object], ...] = ()
    task: str = "question-answering"
    alternatives: tuple[dict[str, object], ...] = ()

    @property
    def int8_dir(self) -> Path | None:
        return self.out / "int8" if self.gate.passed else None

    def report(self) -> dict[str, object]:
        return {
            "task": self.task,
            "gate": self.gate.to_dict(),
            "fp32": self.fp32.summary() | {"model_dir": str(self.out / "fp32"), "bytes": self.sizes["fp32"]},
            "int8": self.int8.summary()
            | {
                "model_dir": str(self.out / "int8") if self.gate.passed else None,
                "bytes": self.sizes["int8"],
            },
            "quantization": self.int8_manifest.quantization.model_dump() if self.int8_manifest.quantization else None,
            "calibration": self.calibration_note,
            "attempts": list(self.attempts),
            "alternatives": list(self.alternatives),
        }


def dir_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file())


def _calibration(request: QuantizeRequest, info: TaskInfo, judge: Judge) -> tuple[list[Any], str]:
    """Calibration inputs (static mode) and where they came from, read before any work starts."""
    if request.options.mode == "dynamic":
        return [], "none (dynamic quantization measures activation ranges at run time)"
    if request.calibration_data is None:
        what = "the eval set" if judge.labelled else "the gate's calibration text"
        return judge.calibration_items(), f"{judge.data} (no --calibration given: {what} is used)"
    return judge_for(info, None, request.calibration_data).calibration_items(), str(request.calibration_data)


def attempt_record(options: QuantizeOptions, int8: Any, passed: bool) -> dict[str, object]:
    record: dict[str, object] = {"options": options.describe(), "passed": passed}
    if isinstance(int8, Evaluation):
        record["f1"] = int8.score.f1
    else:
        record["metrics"] = {name: round(value, 4) for name, value in int8.metrics.items()}
    return record


def run_quantize(request: QuantizeRequest, say: Callable[[str], None] = lambda _: None) -> QuantizeOutcome:
    """Build, evaluate and gate. A failed gate deletes the INT8 directory: only FP32 + report remain."""
    check_max_drop(request.max_f1_drop)
    limits = GateLimits(request.max_f1_drop, request.min_cosine)
    info = detect_task(request.model, request.task)
    if info.task == "text-generation":
        raise SageboxError(
            f"{request.model} holds a decoder LLM ({info.architecture}): `sagebox quantize` does not take decoder "
            "LLMs; `sagebox build --task text-generation` builds their FP32 and gated INT8 models"
        )
    judge = judge_for(info, request.eval_data, request.calibration_data)
    calibration_items, calibration_source = _calibration(request, info, judge)
    options = request.options
    predictor_options = PredictorOptions(threads=request.threads)
    module = load_task_module(info)
    with staged_dir(request.out) as staging:
        say(f"exporting FP32 ({options.runtime}) {info.task} model from {request.model}")
        fp32_manifest = build_fp32(
            request.model,
            staging / "fp32",
            options.runtime,
            module,
            fuse=request.fuse,
            info=info,
            source=request.source,
        )
        feeds = []
        if calibration_items:
            task = task_for(fp32_manifest, staging / "fp32")
            feeds = task_calibration_batches(
                calibration_items, task, options.calibration_batches, options.calibration_batch_size
            )
        say(f"evaluating FP32 on {judge.data}")
        fp32_eval = judge.evaluate(staging / "fp32", predictor_options)
        attempts: list[dict[str, object]] = []
        for candidate in (options, *request.fallbacks):
            say(f"quantizing INT8 ({candidate.describe()})")
            int8_manifest = build_int8(request.model, staging / "fp32", staging / "int8", candidate, feeds, module)
            say("evaluating INT8")
            int8_eval = judge.evaluate(staging / "int8", predictor_options)
            gate = judge.gate(fp32_eval, int8_eval, limits)
            attempts.append(attempt_record(candidate, int8_eval, gate.passed))
            if gate.passed:
                break
            say(gate.message())
        calibration_note = calibration_source
        if feeds:
            calibration_note += f"; {len(feeds)} batch(es) of up to {options.calibration_batch_size}"
            if len(feeds) < options.calibration_batches:
                calibration_note += f" (fewer than the {options.calibration_batches} asked: the data ran out)"
        alternatives: list[dict[str, object]] = []
        if gate.passed and request.alternatives:
            alternatives = _alternatives(request, info, judge, fp32_eval, limits, staging, module, say)
            int8_manifest = load_verified(staging / "int8")
        sizes = {"fp32": dir_bytes(staging / "fp32"), "int8": dir_bytes(staging / "int8")}
        if not gate.passed:
            # A rejected INT8 model must not be loadable or packageable by mistake.
            shutil.rmtree(staging / "int8")
        outcome = QuantizeOutcome(
            request.out,
            fp32_eval,
            int8_eval,
            gate,
            fp32_manifest,
            int8_manifest,
            sizes,
            calibration_note,
            tuple(attempts),
            info.task,
            tuple(alternatives),
        )
        (staging / REPORT_NAME).write_text(json.dumps(outcome.report(), indent=2, sort_keys=True) + "\n")
    return outcome


def _alternatives(
    request: QuantizeRequest,
    info: TaskInfo,
    judge: Judge,
    fp32_eval: Any,
    limits: GateLimits,
    staging: Path,
    module: Any,
    say: Callable[[str], None],
) -> list[dict[str, object]]:
    """Build, gate and time each alternative runtime's INT8 model; merge those that pass into staging/int8."""
    from container.env import available_cpus
    from sagebox.pipeline.quantize.choose import kinds_for, merge_alternative, time_builds

    primary = load_verified(staging / "int8")
    records: list[dict[str, object]] = []
    for options in request.alternatives:
        record: dict[str, object] = {"options": options.describe(), "runtime": options.runtime}
        records.append(record)
        items, source = _calibration(dataclasses.replace(request, options=options), info, judge)
        task = task_for(load_verified(staging / "fp32"), staging / "fp32")
        feeds = task_calibration_batches(items, task, options.calibration_batches, options.calibration_batch_size)
        record["calibration"] = f"{source}; {len(feeds)} batch(es)"
        out = staging / f"int8-{options.runtime}"
        say(f"quantizing INT8 for {options.runtime} ({options.describe()}), a build for the CPU kinds it is faster on")
        try:
            build_int8(request.model, staging / "fp32", out, options, feeds, module)
        except Exception as exc:  # an optional build: the primary INT8 model stands without it
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            record.update({"passed": False, "error": reason})
            say(f"{options.runtime}: the INT8 build failed ({reason}); not kept")
            shutil.rmtree(out, ignore_errors=True)
            continue
        say(f"evaluating INT8 ({options.runtime})")
        evaluation = judge.evaluate(out, PredictorOptions(threads=request.threads))
        gate = judge.gate(fp32_eval, evaluation, limits)
        record.update(attempt_record(options, evaluation, gate.passed))
        if not gate.passed:
            say(f"{options.runtime}: {gate.message()}; not kept")
            shutil.rmtree(out)
            continue
        say(f"timing INT8 {primary.runtime} against {options.runtime} on this machine")
        timing = time_builds({primary.runtime: staging / "int8", options.runtime: out}, available_cpus())
        kinds, reason = kinds_for(options.runtime, primary.runtime, timing)
        merge_alternative(staging / "int8", out, kinds, reason)
        shutil.rmtree(out)
        record.update({"cpu_kinds": kinds, "timing_ms": timing.p50_ms, "timed_on": timing.cpu_kind})
        say(f"{options.runtime} kept for CPU kinds: {', '.join(kinds) or 'none (pin it with SAGEBOX_RUNTIME)'}")
    return records


def evaluate_only(model_dir: Path, data: Path | None, threads: int = 1) -> Any:
    """A model directory's scores on labelled data of its task (SQuAD JSON for question answering); a text-generation
    model's perplexity on `data`'s texts (lines of a .txt, JSON Lines or CSV), by default on the built-in held-out
    text; a text-generation build's work folder (its fp32/ and int8/): both perplexities, their ratio and the greedy
    agreement, judged as the build's gate judges them with its default limits."""
    from sagebox.pipeline.gate.generation_gate import evaluate_generation_build, is_generation_build

    if not model_dir.is_dir():
        raise SageboxError(f"model directory {model_dir} does not exist")
    if is_generation_build(model_dir):
        from sagebox.pipeline.data.task_data import load_texts

        texts = list(load_texts(data)) if data is not None else None
        return evaluate_generation_build(model_dir, texts, str(data) if data is not None else None)
    manifest = load_verified(model_dir)  # a tampered or incomplete directory: ManifestError, one line
    if manifest.task == "text-generation":
        from sagebox.pipeline.data.task_data import load_texts
        from sagebox.pipeline.gate.perplexity import evaluate_perplexity

        texts = list(load_texts(data)) if data is not None else None
        return evaluate_perplexity(model_dir, texts, str(data) if data is not None else None)
    if data is None:
        raise SageboxError(f"--data is required to evaluate a {manifest.task} model (labelled data of its task)")
    options = PredictorOptions(threads=threads)
    if manifest.task == "question-answering":
        return evaluate_model_dir(model_dir, load_squad(data, require_answers=True), options)
    info = TaskInfo(
        manifest.task,
        manifest.source.architecture,
        {},
        model_dir,
        manifest.tokenizer.max_length,
        tuple(manifest.labels) if manifest.labels else None,
        manifest.problem_type,
        manifest.pooling,
    )
    return judge_for(info, data, None).evaluate(model_dir, options)
