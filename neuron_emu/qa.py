"""`compile_model` / `compile_qa`: compile a model for Inferentia2/Trainium the way Sagebox serves it.

One artifact holds a graph per sequence bucket (weights stored once) with dynamic batching enabled, the
custom-op libraries the graph calls, and the cost plan of every bucket. `compile_model` takes any model called as
`model(input_ids, attention_mask[, token_type_ids])` whose outputs have the batch dimension first (classification
logits, pooled embeddings, token-classification or QA logits); `compile_qa` is its extractive-QA case, requiring
`(start_logits, end_logits)`. (compile_model lives here rather than in a module of its own name: a submodule
`neuron_emu.compile_model` would shadow the function of that name on the package once imported.)
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
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
from neuron_emu.runtime import cost_plan, describe, dynamic_batch, graphs
from neuron_emu.tracing import trace_buckets

DEFAULT_COMPILER_ARGS = "--auto-cast matmult --auto-cast-type bf16"
DEFAULT_QA_COMPILER_ARGS = DEFAULT_COMPILER_ARGS
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
    """The per-bucket cost plans `compile_model` / `compile_qa` wrote into a model directory
    (`neuron_cost_plan.json`)."""
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


def _examples(batch_size: int, lengths: Sequence[int], num_inputs: int) -> list[tuple[torch.Tensor, ...]]:
    """Per bucket: input_ids and attention_mask all ones (a traced graph then gives the eager result on padded
    inputs), token_type_ids zeros."""
    examples = []
    for length in lengths:
        ones = torch.ones(batch_size, length, dtype=torch.long)
        example = (ones, ones.clone(), torch.zeros(batch_size, length, dtype=torch.long))
        examples.append(example[:num_inputs])
    return examples


def _bucket_outputs(
    traced: torch.jit.ScriptModule, examples: Sequence[tuple[torch.Tensor, ...]]
) -> list[tuple[torch.Tensor, ...]]:
    """Each bucket's graph run on its example, untrimmed: the shapes the model gives at that length."""
    with torch.inference_mode():
        return [tuple(graph(list(example))) for graph, example in zip(graphs(traced), examples, strict=True)]


def _eager_outputs(
    model: torch.nn.Module, examples: Sequence[tuple[torch.Tensor, ...]]
) -> list[tuple[torch.Tensor, ...]] | None:
    """The model's own outputs per bucket example (for checks that must precede tracing, whose entry module already
    trims the listed sequence dimensions); None when the model fails or returns other than tensors (the trace then
    says why)."""
    results: list[tuple[torch.Tensor, ...]] = []
    try:
        with torch.inference_mode():
            for example in examples:
                out = model(*example)
                outs = (out,) if isinstance(out, torch.Tensor) else out
                if not isinstance(outs, tuple | list) or not all(isinstance(o, torch.Tensor) for o in outs):
                    return None
                results.append(tuple(outs))
    except Exception:
        return None
    return results


# Checks the traced outputs of every bucket (bucket length -> outputs, batch size) before anything is written.
OutputCheck = Callable[[Mapping[int, tuple[Any, ...]], int], None]


def _check_qa_outputs(per_bucket: Mapping[int, tuple[Any, ...]], batch_size: int) -> None:
    for length, outputs in per_bucket.items():
        if not (len(outputs) == 2 and all(tuple(o.shape) == (batch_size, length) for o in outputs)):
            raise ArtifactError("the QA model must return (start_logits, end_logits), each [batch, seq]")


def _seq_dims_check(output_seq_dims: Sequence[int | None] | None) -> OutputCheck:
    """Outputs are finite tensors with the batch dimension first; the listed sequence dimensions follow the bucket
    length, and no unlisted output changes shape with it (it would come back padded to the bucket)."""
    listed = list(output_seq_dims or [])

    def check(per_bucket: Mapping[int, tuple[Any, ...]], batch_size: int) -> None:
        shapes: dict[int, set[tuple[int, ...]]] = {}
        for length, outputs in per_bucket.items():
            if output_seq_dims is not None and len(listed) != len(outputs):
                raise ArtifactError(f"output_seq_dims has {len(listed)} entries for the model's {len(outputs)} outputs")
            for index, out in enumerate(outputs):
                if not isinstance(out, torch.Tensor) or out.dim() == 0 or out.shape[0] != batch_size:
                    shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                    raise ArtifactError(
                        f"output {index} is {shape}; every output must be a tensor with the batch dimension "
                        f"({batch_size}) first"
                    )
                if out.is_floating_point() and not bool(torch.isfinite(out).all()):
                    raise ArtifactError(f"output {index} is not finite on the example inputs (bucket {length})")
                dim = listed[index] if index < len(listed) else None
                if dim is None:
                    shapes.setdefault(index, set()).add(tuple(out.shape))
                elif not 1 <= dim < out.dim() or out.shape[dim] != length:
                    raise ArtifactError(
                        f"output {index} is {list(out.shape)} in bucket {length}; its dimension {dim} is not the "
                        "sequence (output_seq_dims lists the dimension that follows the input length, or None)"
                    )
        for index, seen in shapes.items():
            if len(seen) > 1:
                raise ArtifactError(
                    f"output {index} changes shape with the sequence bucket ({sorted(seen)}); list its sequence "
                    "dimension in output_seq_dims so that it is trimmed back to the input length"
                )

    return check


def _compile(
    model: torch.nn.Module,
    buckets: Sequence[int],
    batch_size: int,
    compiler_args: str | None,
    out_dir: Path,
    prices: Mapping[str, float] | None,
    output_seq_dims: Sequence[int | None] | None,
    num_inputs: int,
    check: OutputCheck,
    check_before_tracing: bool = False,
) -> CompiledArtifact:
    lengths = _check_buckets(buckets)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ArtifactError(f"batch_size must be a positive integer, got {batch_size!r}")
    if num_inputs not in (2, 3):
        raise ArtifactError(
            f"num_inputs must be 2 (input_ids, attention_mask) or 3 (and token_type_ids), got {num_inputs!r}"
        )
    args = DEFAULT_COMPILER_ARGS if compiler_args is None else compiler_args
    options = parse_compiler_args(args)
    examples = _examples(batch_size, lengths, num_inputs)
    eager = _eager_outputs(model, examples) if check_before_tracing else None
    if eager is not None:
        check(dict(zip(lengths, eager, strict=True)), batch_size)
    traced = trace_buckets(
        model,
        examples,
        seq_dim=1,
        pad_values=[0] * num_inputs,
        output_seq_dims=list(output_seq_dims or []),
        compiler_args=args,
    )
    check(dict(zip(lengths, _bucket_outputs(traced, examples), strict=True)), batch_size)
    dynamic_batch(traced)

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


def compile_model(
    model: torch.nn.Module,
    buckets: Sequence[int],
    batch_size: int,
    compiler_args: str | None,
    out_dir: Path,
    prices: Mapping[str, float] | None = None,
    output_seq_dims: Sequence[int | None] | None = None,
    *,
    num_inputs: int = 3,
) -> CompiledArtifact:
    """Trace `model(input_ids, attention_mask, token_type_ids)` (or, with num_inputs=2, without token_type_ids) for
    every sequence bucket into one artifact with dynamic batching enabled.

    `output_seq_dims` gives, per output, the dimension that follows the input length (trimmed back to it after a
    padded bucket runs), or None for outputs without one: [None] for classification logits [batch, labels] or a
    pooled embedding [batch, hidden], [1] for token-classification logits [batch, seq, labels], [1, 1] for QA.
    None (the default) means no output has a sequence dimension. Every output must be a finite tensor with the batch
    dimension first. Writes `model.neuron.pt`, the custom-op libraries it calls and `neuron_cost_plan.json` into
    `out_dir` (each file replaced atomically; nothing is written when a check fails). compiler_args None means
    DEFAULT_COMPILER_ARGS. `prices` (instance type -> on-demand USD/hour) fills the plans' $ columns.
    """
    return _compile(
        model,
        buckets,
        batch_size,
        compiler_args,
        out_dir,
        prices,
        output_seq_dims,
        num_inputs,
        _seq_dims_check(output_seq_dims),
        check_before_tracing=True,
    )


def compile_qa(
    model: torch.nn.Module,
    buckets: Sequence[int],
    batch_size: int,
    compiler_args: str | None,
    out_dir: Path,
    prices: Mapping[str, float] | None = None,
) -> CompiledArtifact:
    """Trace `model(input_ids, attention_mask, token_type_ids) -> (start, end logits)` for every bucket.

    compile_model for extractive QA: both outputs [batch, seq], trimmed back to the input length. Writes
    `model.neuron.pt`, the custom-op libraries it calls and `neuron_cost_plan.json` into `out_dir` (each file
    replaced atomically). compiler_args None means DEFAULT_QA_COMPILER_ARGS. `prices` (instance type -> on-demand
    USD/hour) fills the plans' $ columns; None leaves them out.
    """
    return _compile(model, buckets, batch_size, compiler_args, out_dir, prices, [1, 1], 3, _check_qa_outputs)
