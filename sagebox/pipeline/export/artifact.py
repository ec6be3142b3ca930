"""Model directories written atomically: build in a staging folder, hash, write the manifest, then swap in."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from container import __version__
from container.manifest import (
    MANIFEST_NAME,
    CompileSpec,
    GenerationSpec,
    Manifest,
    ManifestError,
    PoolingSpec,
    ProblemType,
    QuantizationSpec,
    Runtime,
    SourceSpec,
    Task,
    TokenizerSpec,
    Variant,
    hash_files,
    load_verified,
)


@contextmanager
def staged_dir(out_dir: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside `out_dir`: it replaces `out_dir` on success, vanishes on error."""
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.staging-"))
    try:
        yield staging
        make_world_readable(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    replace_dir(staging, out_dir)


def make_world_readable(root: Path) -> None:
    """Directories 0755, files 0644: servers run as non-root users (the image's, SageMaker's) must read models.

    `mkdtemp` makes 0700 directories, which such a user could not enter.
    """
    root.chmod(0o755)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def replace_dir(new: Path, target: Path) -> None:
    """Swap `new` into `target`'s place; an existing `target` is removed only after the swap succeeded."""
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)


def write_manifest(
    model_dir: Path,
    *,
    variant: Variant,
    runtime: Runtime,
    model_file: str,
    buckets: list[int],
    max_length: int,
    source: SourceSpec,
    quantization: QuantizationSpec | None = None,
    compile_spec: CompileSpec | None = None,
    tokenizer_file: str = "tokenizer.json",
    task: Task = "question-answering",
    labels: list[str] | None = None,
    problem_type: ProblemType | None = None,
    pooling: PoolingSpec | None = None,
    generation: GenerationSpec | None = None,
) -> Manifest:
    """Hash every file already in `model_dir` and write the manifest that vouches for them."""
    manifest = Manifest(
        tool_version=__version__,
        task=task,
        labels=labels,
        problem_type=problem_type,
        pooling=pooling,
        generation=generation,
        variant=variant,
        runtime=runtime,
        model_file=model_file,
        tokenizer=TokenizerSpec(file=tokenizer_file, max_length=max_length),
        sequence_buckets=buckets,
        source=source,
        quantization=quantization,
        compile=compile_spec,
        files=hash_files(model_dir),
    )
    (model_dir / MANIFEST_NAME).write_text(manifest.to_json(), encoding="utf-8")
    return manifest


def task_fields(manifest: Manifest) -> dict[str, Any]:
    """The task-specific fields of `manifest`, for a manifest of another variant of the same model."""
    return {
        "task": manifest.task,
        "labels": manifest.labels,
        "problem_type": manifest.problem_type,
        "pooling": manifest.pooling,
        "generation": manifest.generation,
    }


def current(model_dir: Path, task: str, source: SourceSpec, variant: str | None = None) -> Manifest | None:
    """The directory's manifest if it verifies and was built from this model for this task (and holds `variant`,
    when one is named), else None: what a build reuses instead of building again."""
    try:
        manifest = load_verified(model_dir)
    except ManifestError:
        return None
    same = (manifest.source.name, manifest.source.revision, manifest.source.architecture) == (
        source.name,
        source.revision,
        source.architecture,
    )
    return manifest if same and manifest.task == task and variant in (None, manifest.variant) else None
