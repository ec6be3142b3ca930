"""Build servable model directories (tokenizer + graph + manifest) from a Hugging Face QA model folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from container.manifest import Manifest, Runtime, SourceSpec
from sagebox.errors import SageboxError
from sagebox.pipeline import export
from sagebox.pipeline.artifact import staged_dir, write_manifest
from sagebox.pipeline.hf_model import QAModule, check_model_folder, load_qa_module

# CPU runtimes take any shape, so buckets only bound padding and the number of shapes to warm up: 32-token steps
# up to 192, where most SQuAD-style requests fall (BERT-base INT8 on SQuAD-style requests: +18% QPS sequential
# and micro-batched, against 64/128/256/384).
DEFAULT_BUCKETS = (64, 96, 128, 160, 192, 256, 320, 384)
# Bumped when export choices change what the same model folder builds into (fusions, buckets), so cached
# artifacts are rebuilt: 2 keeps residual adds apart from layer norms, 3 has 32-token CPU buckets up to 192.
BUILD_RECIPE = 3
MODEL_FILES: dict[str, str] = {"torchscript": "model.pt", "onnxruntime": "model.onnx"}
FUSE_ONNX_BY_DEFAULT = True


def buckets_for(config: dict[str, object], requested: tuple[int, ...] = DEFAULT_BUCKETS) -> tuple[list[int], int]:
    """Buckets the model's position embeddings allow, and the tokenizer max length (the largest bucket)."""
    max_positions = int(config.get("max_position_embeddings", 512) or 512)  # type: ignore[call-overload]
    limit = min(max_positions, 512)
    buckets = sorted({b for b in requested if b <= limit})
    if not buckets:
        raise SageboxError(f"no sequence bucket fits the model's {max_positions} positions")
    return buckets, buckets[-1]


def source_spec(model_dir: Path, config: dict[str, object]) -> SourceSpec:
    """Name, architecture and license; a `sagebox_source.json` in the folder supplies name and license."""
    archs = config.get("architectures") or [config.get("model_type", "unknown")]
    name = str(config.get("_name_or_path") or model_dir.name)
    license_name = "unknown"
    source_file = model_dir / "sagebox_source.json"
    if source_file.is_file():
        try:
            info = json.loads(source_file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SageboxError(f"{source_file} is not valid JSON: {exc}") from None
        if not isinstance(info, dict):
            raise SageboxError(f"{source_file} must hold a JSON object")
        name = str(info.get("name") or name)
        license_name = str(info.get("license", license_name))
    return SourceSpec(name=name, architecture=str(archs[0]), license=license_name)  # type: ignore[index]


def build_fp32(
    model_dir: Path,
    out_dir: Path,
    runtime: Runtime = "onnxruntime",
    module: QAModule | None = None,
    fuse: bool = FUSE_ONNX_BY_DEFAULT,
) -> Manifest:
    """Export the FP32 graph for `runtime` into a fresh, verified model directory at `out_dir`.

    ONNX graphs get ONNX Runtime's offline transformer fusions when `fuse` (and the architecture allows).
    """
    if runtime not in MODEL_FILES:
        raise SageboxError(f"FP32 export supports {', '.join(MODEL_FILES)}, not {runtime!r}")
    config = check_model_folder(model_dir)
    module = module or load_qa_module(model_dir)
    buckets, max_length = buckets_for(config)
    model_file = MODEL_FILES[runtime]
    with staged_dir(out_dir) as staging:
        if runtime == "torchscript":
            export.to_torchscript(module, staging / model_file)
        else:
            export.to_onnx(module, staging / model_file)
            if fuse:
                export.fuse_onnx(staging / model_file, config)
        shutil.copyfile(model_dir / "tokenizer.json", staging / "tokenizer.json")
        manifest = write_manifest(
            staging,
            variant="fp32",
            runtime=runtime,
            model_file=model_file,
            buckets=buckets,
            max_length=max_length,
            source=source_spec(model_dir, config),
        )
    return manifest
