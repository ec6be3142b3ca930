"""Every artifact from one Hugging Face QA folder: FP32, gated INT8 and Neuron model directories, each packaged
as a SageMaker model.tar.gz in the layout the CDK targets expect (`<out>/<variant>/model.tar.gz`).

Steps whose output is already there and verifies are skipped, so a rerun only redoes what changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from container.manifest import ManifestError, load_verified
from sagebox.pipeline.accuracy_gate import GateFailed


@dataclass(frozen=True)
class Artifacts:
    model_dirs: dict[str, Path]  # variant -> verified model directory
    tarballs: dict[str, Path]  # variant -> model.tar.gz
    quantize_report: dict[str, object]


def _verified(model_dir: Path) -> bool:
    try:
        load_verified(model_dir)
    except ManifestError:
        return False
    return True


def build_all(
    model: Path,
    eval_data: Path,
    work_dir: Path,
    out_dir: Path,
    *,
    calibration_data: Path | None = None,
    threads: int = 1,
    say: Callable[[str], None] = lambda _: None,
) -> Artifacts:
    from sagebox.pipeline.package import package_model_dir
    from sagebox.pipeline.quant_options import QuantizeOptions, fallbacks
    from sagebox.pipeline.quantize_flow import REPORT_NAME, QuantizeRequest, run_quantize

    quantized = work_dir / "quantized"
    if not (_verified(quantized / "fp32") and _verified(quantized / "int8")):
        outcome = run_quantize(
            QuantizeRequest(
                model=model,
                out=quantized,
                eval_data=eval_data,
                calibration_data=calibration_data,
                threads=threads,
                fallbacks=fallbacks(QuantizeOptions()),
            ),
            say=say,
        )
        if not outcome.gate.passed:
            raise GateFailed(outcome.gate.message())
    neuron = work_dir / "neuron"
    if not _verified(neuron):
        from sagebox.pipeline.compile import build_neuron

        say("compiling for NeuronCores (neuron_emu, bf16 auto-cast on matmuls)")
        build_neuron(model, neuron)
    model_dirs = {"fp32": quantized / "fp32", "int8": quantized / "int8", "neuron": neuron}
    tarballs = {}
    for variant, model_dir in model_dirs.items():
        tarball = out_dir / variant / "model.tar.gz"
        if not tarball.is_file() or tarball.stat().st_mtime < (model_dir / "manifest.json").stat().st_mtime:
            say(f"packaging {variant} as {tarball}")
            package_model_dir(model_dir, tarball)
        tarballs[variant] = tarball
    report_path = quantized / REPORT_NAME
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    return Artifacts(model_dirs, tarballs, report)
