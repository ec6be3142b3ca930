"""Build servable model directories (tokenizer + graph + manifest) from a Hugging Face model folder, any task."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from container.manifest import Manifest, Runtime, SourceSpec
from sagebox.errors import SageboxError
from sagebox.pipeline.export import graph as export
from sagebox.pipeline.export.artifact import staged_dir, write_manifest
from sagebox.pipeline.load.hf_model import TaskModule, load_task_module
from sagebox.pipeline.load.hf_task import TaskInfo, detect_task, read_json, tokenizer_file

# CPU runtimes take any shape, so buckets only bound padding and the number of shapes to warm up: 32-token steps
# up to 192, where most SQuAD-style requests fall (BERT-base INT8 on SQuAD-style requests: +18% QPS sequential
# and micro-batched, against 64/128/256/384).
DEFAULT_BUCKETS = (64, 96, 128, 160, 192, 256, 320, 384)
# Question answering windows long contexts at the largest bucket (384, as the QA recipes train); the other tasks
# take text up to the model's own maximum, so their last bucket is that maximum (512 for most encoders).
MAX_BUCKET = 512
# Bumped when export choices change what the same model folder builds into (fusions, buckets), so cached
# artifacts are rebuilt: 2 keeps residual adds apart from layer norms, 3 has 32-token CPU buckets up to 192,
# 4 writes schema-2 manifests (task fields), 5 adds the OpenVINO INT8 build beside ONNX Runtime's (issue 41).
BUILD_RECIPE = 5
MODEL_FILES: dict[str, str] = {"torchscript": "model.pt", "onnxruntime": "model.onnx"}
FUSE_ONNX_BY_DEFAULT = True
SOURCE_FILE = "sagebox_source.json"


@dataclass(frozen=True)
class ModelSource:
    """Where a model came from, as the manifest records it (a Hub model: its id, pinned commit and license)."""

    folder: Path
    name: str | None = None
    origin: str = "folder"
    revision: str | None = None
    license: str | None = None

    @classmethod
    def resolve(cls, spec: str | Path, say: Callable[[str], None] = lambda _: None) -> ModelSource:
        """A local folder, or a Hub id (`org/name[@revision]`) downloaded into the Hugging Face cache."""
        from sagebox.pipeline.load.sources import resolve_model

        resolved = resolve_model(spec, say=say)
        if resolved.origin == "folder":
            return cls(resolved.path)
        return cls(
            resolved.path,
            name=resolved.name,
            origin="hub",
            revision=resolved.revision,
            license=None if resolved.license == "unknown" else resolved.license,
        )


def buckets_for(
    info: TaskInfo | dict[str, object], requested: tuple[int, ...] = DEFAULT_BUCKETS
) -> tuple[list[int], int]:
    """Buckets the model's positions allow, and the tokenizer max length (the largest bucket). Question answering
    keeps `requested`; other tasks end at the model's maximum (at most MAX_BUCKET)."""
    if isinstance(info, dict):  # a config.json: question answering, as before tasks existed
        max_positions = int(info.get("max_position_embeddings", 512) or 512)  # type: ignore[call-overload]
        limit, task = min(max_positions, MAX_BUCKET), "question-answering"
    else:
        limit, task = min(info.max_length, MAX_BUCKET), info.task
    wanted = set(requested) if task == "question-answering" else {*requested, limit}
    buckets = sorted(b for b in wanted if b <= limit)
    if not buckets:
        raise SageboxError(f"no sequence bucket fits the model's {limit} positions")
    return buckets, buckets[-1]


def source_spec(info: TaskInfo, source: ModelSource | None = None) -> SourceSpec:
    """Name, architecture, license, origin and pinned revision; a `sagebox_source.json` in a folder supplies name
    and license (the demo's models), a model card's `license:` the license otherwise."""
    folder = source.folder if source is not None else info.model_dir
    name = str(info.config.get("_name_or_path") or folder.name)
    license_name = card_license(folder) or card_license(info.model_dir) or "unknown"
    source_file = folder / SOURCE_FILE
    if source_file.is_file():
        record = read_json(source_file)
        name = str(record.get("name") or name)
        license_name = str(record.get("license", license_name))
    if source is not None:
        name = source.name or name
        license_name = source.license or license_name
    origin: Literal["folder", "hub"] = "hub" if source is not None and source.origin == "hub" else "folder"
    return SourceSpec(
        name=name,
        architecture=info.architecture,
        license=license_name,
        origin=origin,
        revision=source.revision if source is not None else None,
    )


def card_license(folder: Path) -> str | None:
    """The `license:` of the folder's model card (README.md front matter), if it records one."""
    from sagebox.pipeline.load.sources import card_license as read_card

    found = read_card(folder / "README.md")
    return None if found == "unknown" else found


def task_manifest_fields(info: TaskInfo) -> dict[str, Any]:
    return {
        "task": info.task,
        "labels": list(info.labels) if info.labels is not None else None,
        "problem_type": info.problem_type,
        "pooling": info.pooling,
    }


def build_fp32(
    model_dir: Path,
    out_dir: Path,
    runtime: Runtime = "onnxruntime",
    module: TaskModule | None = None,
    fuse: bool = FUSE_ONNX_BY_DEFAULT,
    *,
    info: TaskInfo | None = None,
    source: ModelSource | None = None,
) -> Manifest:
    """Export the FP32 graph for `runtime` into a fresh, verified model directory at `out_dir`.

    ONNX graphs get ONNX Runtime's offline transformer fusions when `fuse` (and the architecture allows).
    """
    if runtime not in MODEL_FILES:
        raise SageboxError(f"FP32 export supports {', '.join(MODEL_FILES)}, not {runtime!r}")
    info = info or detect_task(model_dir)
    module = module or load_task_module(info)
    buckets, max_length = buckets_for(info)
    model_file = MODEL_FILES[runtime]
    with staged_dir(out_dir) as staging:
        if runtime == "torchscript":
            export.to_torchscript(module, staging / model_file)
        else:
            export.to_onnx(module, staging / model_file)
            if fuse:
                export.fuse_onnx(staging / model_file, info.config)
        shutil.copyfile(tokenizer_file(model_dir, info.model_dir), staging / "tokenizer.json")
        manifest = write_manifest(
            staging,
            variant="fp32",
            runtime=runtime,
            model_file=model_file,
            buckets=buckets,
            max_length=max_length,
            source=source_spec(info, source or ModelSource(model_dir)),
            **task_manifest_fields(info),
        )
    return manifest
