"""The saved form of a tensor-parallel model: a directory a serving process loads with one call.

parallel.json        the manifest (format, degree, input and output shapes, output kind, compiler args, model
                     description)
parallel_plan.json   the tensor-parallel cost plan (an estimate)
rank0.pt ...         one TorchScript archive per rank holding its segments `segment0..segment{K-1}`,
                     each a neuron_emu.trace module (so neuron_emu.describe / cost_plan work on them)

Formats: "neuron_emu.parallel/2" (written now): the last segment takes (hidden, mask bias, reduced, *model inputs)
and returns the model's outputs; `output_kind` says whether the model returns a Tensor ("tensor") or a tuple.
"neuron_emu.parallel/1" (QA models only, still read): the last segment takes (hidden, mask bias, reduced) and
returns (start_logits, end_logits); its manifest has no `output_kind` (read as "tuple").
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

FORMAT = "neuron_emu.parallel/2"
FORMAT_V1 = "neuron_emu.parallel/1"
READABLE_FORMATS = (FORMAT, FORMAT_V1)
OUTPUT_KINDS = ("tensor", "tuple")
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
    output_kind: str = "tuple"
    format: str = FORMAT

    @property
    def head_takes_inputs(self) -> bool:
        """Whether the last segment takes the model's inputs after its state (not so in format 1)."""
        return self.format != FORMAT_V1

    @property
    def batch_first_outputs(self) -> bool:
        """Whether every output has the traced batch size as its first dimension (what dynamic batching splits)."""
        batch = self.input_shapes[0][0] if self.input_shapes and self.input_shapes[0] else None
        return all(len(shape) > 0 and shape[0] == batch for shape in self.output_shapes)

    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        if self.format == FORMAT_V1:
            del raw["output_kind"]  # a format-1 manifest stays readable by the neuron_emu that wrote it
        return raw

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
    if manifest.format not in READABLE_FORMATS:
        readable = " or ".join(repr(f) for f in READABLE_FORMATS)
        raise ArtifactError(f"{path} has format {manifest.format!r}; this neuron_emu reads {readable}")
    if manifest.output_kind not in OUTPUT_KINDS:
        raise ArtifactError(f"{path} has output_kind {manifest.output_kind!r}; expected one of {OUTPUT_KINDS}")
    missing = [name for name in manifest.files if not (directory / name).is_file()]
    if missing:
        raise ArtifactError(f"{directory} lacks {', '.join(missing)} named by its manifest")
    return manifest
