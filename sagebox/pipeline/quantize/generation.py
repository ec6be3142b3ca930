"""The INT8 text-generation model directory: the FP32 one (export/generation.py) in, its INT8 twin out, written
atomically.

The same files as FP32 (config.json, tokenizer.json, the chat template) with model.safetensors replaced by the
engine's INT8 form (container/generation/quantized.py: every linear layer's and the embeddings' weight as int8 with a
float32 scale per output channel; norms, biases and learned positions FP32), and a manifest of variant int8 that
records how: torch, dynamic (activations quantized per token as they come, so no calibration), per channel, packed
for FBGEMM. `check` runs on the staged directory before it replaces anything (the build's accuracy gate): if it
raises, no INT8 directory is left behind, and an older one at `out_dir` is untouched.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from container.generation.linear import ENGINE
from container.generation.quantized import quantize_weights
from container.manifest import Manifest, QuantizationSpec, load_verified
from neuron_emu.llm.config import read_config
from sagebox.errors import SageboxError
from sagebox.pipeline.export.artifact import staged_dir, task_fields, write_manifest

QUANTIZATION = QuantizationSpec(
    backend="torch", mode="dynamic", per_channel=True, calibration_batches=0, weight_dtype="int8", engine=ENGINE
)


def write_int8(fp32_dir: Path, fp32_manifest: Manifest, folder: Path) -> None:
    """The FP32 directory's files into `folder`, its weights quantized."""
    from safetensors.torch import load_file, save_file

    spec = fp32_manifest.generation
    assert spec is not None
    config = read_config(json.loads((fp32_dir / spec.config_file).read_text(encoding="utf-8")))
    for name in fp32_manifest.files:
        if name != fp32_manifest.model_file:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fp32_dir / name, folder / name)
    weights = quantize_weights(config, load_file(str(fp32_dir / fp32_manifest.model_file)))
    save_file(weights, str(folder / fp32_manifest.model_file), metadata={"format": "pt"})


def build_generation_int8(
    fp32_dir: Path,
    out_dir: Path,
    *,
    fp32_manifest: Manifest | None = None,
    check: Callable[[Path, Manifest], None] | None = None,
) -> Manifest:
    """The INT8 directory of the FP32 text-generation directory `fp32_dir` at `out_dir`; `check(staging, manifest)`
    must pass before it is swapped in. Returns its manifest."""
    fp32_manifest = fp32_manifest or load_verified(fp32_dir)
    if fp32_manifest.task != "text-generation" or fp32_manifest.variant != "fp32" or fp32_manifest.runtime != "torch":
        raise SageboxError(
            f"{fp32_dir} holds a {fp32_manifest.task} {fp32_manifest.variant} model on {fp32_manifest.runtime}: INT8 "
            "decoders are quantized from the FP32 text-generation directory"
        )
    with staged_dir(out_dir) as staging:
        write_int8(fp32_dir, fp32_manifest, staging)
        manifest = write_manifest(
            staging,
            variant="int8",
            runtime="torch",
            model_file=fp32_manifest.model_file,
            buckets=list(fp32_manifest.sequence_buckets),
            max_length=fp32_manifest.tokenizer.max_length,
            source=fp32_manifest.source,
            quantization=QUANTIZATION,
            tokenizer_file=fp32_manifest.tokenizer.file,
            **task_fields(fp32_manifest),
        )
        if check is not None:
            check(staging, manifest)
    return manifest
