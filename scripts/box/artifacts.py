"""The demo's artifacts: the trained MiniLM QA model as FP32, INT8 (gated) and Neuron model directories,
each packaged as a SageMaker model.tar.gz. Built once and cached; a changed recipe builds anew."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from container.manifest import ManifestError, load_verified
from scripts.errors import SageboxError
from scripts.paths import cache_dir

VARIANTS = ("fp32", "int8", "neuron")


@dataclass(frozen=True)
class DemoArtifacts:
    model_dirs: dict[str, Path]  # variant -> verified model directory
    tarballs: dict[str, Path]  # variant -> model.tar.gz
    eval_data: Path  # held-out SQuAD-format questions of the demo model
    quantize_report: dict[str, object]


def _verified(model_dir: Path) -> bool:
    try:
        load_verified(model_dir)
    except ManifestError:
        return False
    return True


def demo_artifacts(say: Callable[[str], None] = lambda _: None) -> DemoArtifacts:
    from scripts.pipeline.demo_models import minilm_squad
    from scripts.pipeline.package import package_model_dir
    from scripts.pipeline.quantize_flow import REPORT_NAME

    demo = minilm_squad(progress=say)
    root = cache_dir() / "artifacts" / demo.folder.name
    quantized = root / "quantized"
    if not (_verified(quantized / "fp32") and _verified(quantized / "int8")):
        from scripts.pipeline.quantize_flow import QuantizeRequest, run_quantize

        outcome = run_quantize(
            QuantizeRequest(
                model=demo.folder,
                out=quantized,
                eval_data=demo.dev_data,
                calibration_data=demo.train_data,
                threads=_threads(),
            ),
            say=say,
        )
        if not outcome.gate.passed:
            raise SageboxError(f"the demo's INT8 model failed its accuracy gate: {outcome.gate.message()}")
    neuron = root / "neuron"
    if not _verified(neuron):
        from scripts.pipeline.compile import build_neuron

        say("compiling for NeuronCores (neuron_emu, bf16 auto-cast on matmuls)")
        build_neuron(demo.folder, neuron)
    model_dirs = {"fp32": quantized / "fp32", "int8": quantized / "int8", "neuron": neuron}
    tarballs = {}
    for variant, model_dir in model_dirs.items():
        tarball = root / "packages" / variant / "model.tar.gz"
        if not tarball.is_file() or tarball.stat().st_mtime < (model_dir / "manifest.json").stat().st_mtime:
            say(f"packaging {variant} as {tarball}")
            package_model_dir(model_dir, tarball)
        tarballs[variant] = tarball
    report_path = quantized / REPORT_NAME
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    return DemoArtifacts(model_dirs, tarballs, demo.dev_data, report)


def _threads() -> int:
    from container.env import available_cpus

    return available_cpus()
