"""The saved form of a tensor-parallel model: a directory a serving process loads with one call.

parallel.json        the manifest (format, degree, shapes, compiler args, model description)
parallel_plan.json   the tensor-parallel cost plan (an estimate)
rank0.pt ...         one TorchScript archive per rank holding its segments `segment0..segment{K-1}`,
                     each a neuron_emu.trace module (so neuron_emu.describe / cost_plan work on them)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from neuron_emu.errors import ArtifactError

FORMAT = "neuron_emu.parallel/1"
MANIFEST_FILE = "parallel.json"
PLAN_FILE = "parallel_plan.json"


def rank_file(rank: int) -> str:
    return f"rank{rank}.pt"


class ShardGraphs(torch.nn.Module):
    """The container saved per rank: its traced segments as attributes `segment0`, `segment1`, ..."""

    def __init__(self, segments: Sequence[torch.jit.ScriptModule], rank: int, degree: int) -> None:
        super().__init__()
        for index, segment in enumerate(segments):
            setattr(self, f"segment{index}", segment)
        self.count = len(segments)
        self.rank = rank
        self.degree = degree


@dataclass(frozen=True)
class Manifest:
    tp_degree: int
    segments: int
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    output_shapes: list[list[int]]
    compiler_args: str
    auto_cast: str
    auto_cast_type: str
    model: dict[str, Any]
    dynamic_batch: bool = False
    files: list[str] = field(default_factory=list)
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Manifest:
        return cls(**dict(raw))


def _replace_atomically(target: Path, write: Callable[[Path], object]) -> None:
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    text = json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n"
    _replace_atomically(directory / MANIFEST_FILE, lambda p: p.write_text(text))


def write_artifact(
    directory: Path, manifest: Manifest, shards: Sequence[torch.jit.ScriptModule], plan_json: str
) -> Manifest:
    """Write every rank's archive, the plan and (last, so a reader never sees a manifest without its files) the
    manifest, each file replaced atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    files = [rank_file(rank) for rank in range(len(shards))]
    for name, shard in zip(files, shards, strict=True):

        def save(target: Path, module: torch.jit.ScriptModule = shard) -> None:
            torch.jit.save(module, str(target))

        _replace_atomically(directory / name, save)
    _replace_atomically(directory / PLAN_FILE, lambda p: p.write_text(plan_json + "\n"))
    written = Manifest(**{**manifest.to_dict(), "files": [*files, PLAN_FILE]})
    write_manifest(directory, written)
    return written


def script_shard(segments: Sequence[torch.jit.ScriptModule], rank: int, degree: int) -> torch.jit.ScriptModule:
    scripted: torch.jit.ScriptModule = torch.jit.script(ShardGraphs(segments, rank, degree))
    return scripted


def read_manifest(directory: Path) -> Manifest:
    path = directory / MANIFEST_FILE
    if not path.is_file():
        raise ArtifactError(f"{directory} has no {MANIFEST_FILE}: not a neuron_emu.parallel model directory")
    try:
        raw = json.loads(path.read_text())
        manifest = Manifest.from_dict(raw)
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path} is not a neuron_emu.parallel manifest: {exc}") from None
    if manifest.format != FORMAT:
        raise ArtifactError(f"{path} has format {manifest.format!r}; this neuron_emu reads {FORMAT!r}")
    missing = [name for name in manifest.files if not (directory / name).is_file()]
    if missing:
        raise ArtifactError(f"{directory} lacks {', '.join(missing)} named by its manifest")
    return manifest
