"""`compile_qa`: compile an extractive-QA model for Inferentia2/Trainium the way Sagebox serves it.

One artifact holds a graph per sequence bucket (weights stored once) with dynamic batching enabled, the
custom-op libraries the graph calls, and the cost plan of every bucket.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neuron_emu import __version__
from neuron_emu.compiler_args import parse_compiler_args
from neuron_emu.cost.plan import CostPlan
from neuron_emu.cost.records import InstanceCost
from neuron_emu.custom_op.library import loaded_libraries
from neuron_emu.errors import ArtifactError
from neuron_emu.hardware import target_instances
from neuron_emu.runtime import cost_plan, describe, dynamic_batch
from neuron_emu.tracing import trace_buckets

DEFAULT_QA_COMPILER_ARGS = "--auto-cast matmult --auto-cast-type bf16"
MODEL_FILE = "model.neuron.pt"
PLAN_FILE = "neuron_cost_plan.json"
MIN_BUCKET = 8


@dataclass(frozen=True)
class CompileInfo:
    """How an artifact was compiled: what a deployment manifest records (its caller converts it)."""

    compiler: str
    auto_cast: str
    auto_cast_type: str
    target_instances: tuple[str, ...]
    custom_op_libraries: tuple[str, ...]
    backend: str = "neuron_emu"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (lists for the tuples)."""
        return {
            "compiler": self.compiler,
            "auto_cast": self.auto_cast,
            "auto_cast_type": self.auto_cast_type,
            "target_instances": list(self.target_instances),
            "custom_op_libraries": list(self.custom_op_libraries),
            "backend": self.backend,
        }


@dataclass(frozen=True)
class CompiledArtifact:
    model_file: str
    plan_file: str
    files: tuple[str, ...]
    custom_op_libraries: tuple[str, ...]
    buckets: tuple[int, ...]
    batch_size: int
    compiler_args: str
    auto_cast: str
    auto_cast_type: str
    target_instances: tuple[str, ...]
    plans: dict[int, CostPlan]

    def compile_info(self) -> CompileInfo:
        """How this artifact was compiled (compiler, auto-cast, target instances, libraries, backend)."""
        return CompileInfo(
            compiler=f"neuron_emu {__version__} (emulating neuronx-cc)",
            auto_cast=self.auto_cast,
            auto_cast_type=self.auto_cast_type,
            target_instances=self.target_instances,
            custom_op_libraries=self.custom_op_libraries,
        )


def _check_buckets(buckets: Sequence[int]) -> list[int]:
    values = list(buckets)
    if not values or any(not isinstance(b, int) or b < MIN_BUCKET for b in values):
        raise ArtifactError(f"sequence buckets must be integers >= {MIN_BUCKET}, got {values}")
    if sorted(set(values)) != values:
        raise ArtifactError(f"sequence buckets must be strictly increasing, got {values}")
    return values


def _replace_atomically(target: Path, write: Any) -> None:
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        write(partial)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def read_plans(model_dir: Path) -> dict[int, CostPlan]:
    """The per-bucket cost plans `compile_qa` wrote into a model directory (`neuron_cost_plan.json`)."""
    path = Path(model_dir) / PLAN_FILE
    try:
        document = json.loads(path.read_text())
        return {int(bucket): CostPlan.from_dict(plan) for bucket, plan in document["buckets"].items()}
    except FileNotFoundError:
        raise ArtifactError(f"{path} does not exist: not a model directory compiled by neuron_emu") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"{path} is not a cost plan document: {exc}") from None


def instance_estimate(plan: CostPlan, instance_type: str) -> InstanceCost | None:
    """The plan's row for one instance type (ml.<type>), or None when the plan has none."""
    return next((row for row in plan.instances if row.instance_type == instance_type), None)


def compile_qa(
    model: torch.nn.Module,
    buckets: Sequence[int],
    batch_size: int,
    compiler_args: str | None,
    out_dir: Path,
    prices: Mapping[str, float] | None = None,
) -> CompiledArtifact:
    """Trace `model(input_ids, attention_mask, token_type_ids) -> (start, end logits)` for every bucket.

    Writes `model.neuron.pt`, the custom-op libraries it calls and `neuron_cost_plan.json` into `out_dir`
    (each file replaced atomically). compiler_args None means DEFAULT_QA_COMPILER_ARGS. `prices` (instance
    type -> on-demand USD/hour) fills the plans' $ columns; None leaves them out.
    """
    lengths = _check_buckets(buckets)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ArtifactError(f"batch_size must be a positive integer, got {batch_size!r}")
    args = DEFAULT_QA_COMPILER_ARGS if compiler_args is None else compiler_args
    options = parse_compiler_args(args)
    examples = [
        (
            torch.ones(batch_size, length, dtype=torch.long),
            torch.ones(batch_size, length, dtype=torch.long),
            torch.zeros(batch_size, length, dtype=torch.long),
        )
        for length in lengths
    ]
    traced = trace_buckets(
        model,
        examples,
        seq_dim=1,
        pad_values=[0, 0, 0],
        output_seq_dims=[1, 1],
        compiler_args=args,
    )
    dynamic_batch(traced)
    with torch.inference_mode():
        outputs = traced(*examples[0])
    if not (
        isinstance(outputs, tuple)
        and len(outputs) == 2
        and all(tuple(o.shape) == (batch_size, lengths[0]) for o in outputs)
    ):
        raise ArtifactError("the QA model must return (start_logits, end_logits), each [batch, seq]")

    info = describe(traced)
    libraries = loaded_libraries()
    lib_paths = [libraries[ns].path for ns in info["custom_op_namespaces"]]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _replace_atomically(out / MODEL_FILE, lambda p: torch.jit.save(traced, str(p)))
    for lib in lib_paths:
        _replace_atomically(out / lib.name, lambda p, src=lib: shutil.copyfile(src, p))
    plans = {length: cost_plan(traced, length, prices) for length in lengths}
    document = {
        "estimate": True,
        "compiler_args": options.text(),
        "batch_size": batch_size,
        "buckets": {str(length): plan.to_dict() for length, plan in plans.items()},
    }
    _replace_atomically(out / PLAN_FILE, lambda p: p.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n"))
    library_names = tuple(lib.name for lib in lib_paths)
    return CompiledArtifact(
        model_file=MODEL_FILE,
        plan_file=PLAN_FILE,
        files=(MODEL_FILE, *library_names, PLAN_FILE),
        custom_op_libraries=library_names,
        buckets=tuple(lengths),
        batch_size=batch_size,
        compiler_args=options.text(),
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        target_instances=target_instances(options.target),
        plans=plans,
    )
