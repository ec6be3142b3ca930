"""`sagebox quantize` end to end: FP32 + INT8 artifacts, both evaluated; INT8 kept only if it passes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from container.manifest import Manifest
from container.predictor import PredictorOptions
from sagebox.errors import SageboxError
from sagebox.pipeline.accuracy_gate import GateResult, check_gate, check_max_drop
from sagebox.pipeline.artifact import staged_dir
from sagebox.pipeline.calibration import calibration_batches, processor_for
from sagebox.pipeline.evaluate import Evaluation, evaluate_model_dir
from sagebox.pipeline.hf_model import check_model_folder, load_qa_module
from sagebox.pipeline.quant_options import QuantizeOptions
from sagebox.pipeline.quantize import build_int8
from sagebox.pipeline.servable import build_fp32
from sagebox.pipeline.squad import QAExample, load_squad

REPORT_NAME = "quantize-report.json"


@dataclass(frozen=True)
class QuantizeRequest:
    model: Path
    out: Path
    eval_data: Path
    options: QuantizeOptions = field(default_factory=QuantizeOptions)
    calibration_data: Path | None = None
    max_f1_drop: float = 1.0
    threads: int = 1
    fuse: bool = True
    # Tried in order after `options` while the accuracy gate fails (see quant_options.fallbacks).
    fallbacks: tuple[QuantizeOptions, ...] = ()


@dataclass(frozen=True)
class QuantizeOutcome:
    out: Path
    fp32: Evaluation
    int8: Evaluation
    gate: GateResult
    fp32_manifest: Manifest
    int8_manifest: Manifest
    sizes: dict[str, int]
    calibration_note: str
    attempts: tuple[dict[str, object], ...] = ()

    @property
    def int8_dir(self) -> Path | None:
        return self.out / "int8" if self.gate.passed else None

    def report(self) -> dict[str, object]:
        return {
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
        }


def dir_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in model_dir.rglob("*") if p.is_file())


def _load_inputs(request: QuantizeRequest) -> tuple[list[QAExample], list[QAExample] | None, str]:
    """Eval and calibration data, both checked before any work starts (a bad file is a one-line error)."""
    eval_examples = load_squad(request.eval_data, require_answers=True)
    calibration = None
    if request.calibration_data is not None:
        calibration = load_squad(request.calibration_data, require_answers=False)
    if request.options.mode == "dynamic":
        return eval_examples, None, "none (dynamic quantization measures activation ranges at run time)"
    if calibration is None:
        return (
            eval_examples,
            eval_examples,
            f"{request.eval_data} (no --calibration given: the eval set is used)",
        )
    return eval_examples, calibration, str(request.calibration_data)


def run_quantize(request: QuantizeRequest, say: Callable[[str], None] = lambda _: None) -> QuantizeOutcome:
    """Build, evaluate and gate. A failed gate deletes the INT8 directory: only FP32 + report remain."""
    check_max_drop(request.max_f1_drop)
    check_model_folder(request.model)
    eval_examples, calibration_examples, calibration_source = _load_inputs(request)
    options = request.options
    predictor_options = PredictorOptions(threads=request.threads)
    module = load_qa_module(request.model)
    with staged_dir(request.out) as staging:
        say(f"exporting FP32 ({options.runtime}) from {request.model}")
        fp32_manifest = build_fp32(request.model, staging / "fp32", options.runtime, module, fuse=request.fuse)
        feeds = []
        if calibration_examples is not None:
            processor = processor_for(staging / "fp32", fp32_manifest.sequence_buckets)
            feeds = calibration_batches(
                calibration_examples, processor, options.calibration_batches, options.calibration_batch_size
            )
        say(f"evaluating FP32 on {len(eval_examples)} questions")
        fp32_eval = evaluate_model_dir(staging / "fp32", eval_examples, predictor_options)
        attempts: list[dict[str, object]] = []
        for candidate in (options, *request.fallbacks):
            say(f"quantizing INT8 ({candidate.describe()})")
            int8_manifest = build_int8(request.model, staging / "fp32", staging / "int8", candidate, feeds, module)
            say(f"evaluating INT8 on {len(eval_examples)} questions")
            int8_eval = evaluate_model_dir(staging / "int8", eval_examples, predictor_options)
            gate = check_gate(fp32_eval.score, int8_eval.score, request.max_f1_drop)
            attempts.append({"options": candidate.describe(), "f1": int8_eval.score.f1, "passed": gate.passed})
            if gate.passed:
                break
            say(gate.message())
        calibration_note = calibration_source
        if feeds:
            calibration_note += f"; {len(feeds)} batch(es) of up to {options.calibration_batch_size}"
            if len(feeds) < options.calibration_batches:
                calibration_note += f" (fewer than the {options.calibration_batches} asked: the data ran out)"
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
        )
        (staging / REPORT_NAME).write_text(json.dumps(outcome.report(), indent=2, sort_keys=True) + "\n")
    return outcome


def evaluate_only(model_dir: Path, data: Path, threads: int = 1) -> Evaluation:
    examples = load_squad(data, require_answers=True)
    if not model_dir.is_dir():
        raise SageboxError(f"model directory {model_dir} does not exist")
    return evaluate_model_dir(model_dir, examples, PredictorOptions(threads=threads))
