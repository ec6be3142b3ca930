"""`neuron_emu.parallel.trace`: compile a BERT-family QA model tensor-parallel over N emulated NeuronCores.

Every rank's graphs are traced with `neuron_emu.trace` (same auto-cast numerics and cost plans as a single-core
trace), so a sharded model and the single-core traced model differ only in how partial sums are added up.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from neuron_emu.compiler_args import CompilerOptions, parse_compiler_args
from neuron_emu.errors import TraceError
from neuron_emu.hardware import target_instances
from neuron_emu.parallel.artifact import Manifest, script_shard
from neuron_emu.parallel.cost import InstanceLinks, ShardProfile, fit_compute, interconnect, parallel_plan
from neuron_emu.parallel.encoder import EncoderParts, encoder_parts
from neuron_emu.parallel.module import ParallelModel
from neuron_emu.parallel.shard import check_degree, divisors, rank_segments, weight_split

Tensor = torch.Tensor
# The eager sharded model must equal the model's own forward up to fp32 summation order.
EAGER_TOLERANCE = 1e-4


def _inputs(example_inputs: Sequence[Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    if isinstance(example_inputs, Tensor) or len(example_inputs) != 3:
        raise TraceError("example_inputs must be (input_ids, attention_mask, token_type_ids)")
    inputs = tuple(example_inputs)
    for index, x in enumerate(inputs):
        if not isinstance(x, Tensor) or x.dim() != 2 or x.dtype.is_floating_point or x.device.type != "cpu":
            raise TraceError(f"example input {index} must be a 2-D integer CPU tensor [batch, sequence]")
    if len({tuple(x.shape) for x in inputs}) != 1:
        raise TraceError(f"example inputs differ in shape: {[list(x.shape) for x in inputs]}")
    return inputs[0], inputs[1], inputs[2]


def check_cores(
    degree: int, instance_type: str | None, options: CompilerOptions, links: Mapping[str, InstanceLinks]
) -> None:
    """Refuse a degree larger than the instance's NeuronCores (else the largest instance `--target` allows)."""
    if instance_type is not None:
        spec = links.get(instance_type) or links.get(f"ml.{instance_type}")
        if spec is None:
            raise TraceError(f"unknown instance type {instance_type!r} (known: {', '.join(sorted(links))})")
        if degree > spec.cores:
            raise TraceError(f"tp_degree {degree} exceeds the {spec.cores} NeuronCores of {spec.instance_type}")
        return
    allowed = set(target_instances(options.target))
    pool = [spec for name, spec in links.items() if name in allowed] or list(links.values())
    largest = max(pool, key=lambda spec: spec.cores)
    if degree > largest.cores:
        kind = f"{options.target} instance" if options.target else "Neuron instance"
        raise TraceError(
            f"tp_degree {degree} exceeds the {largest.cores} NeuronCores of {largest.instance_type}, the largest {kind}"
        )


def _reference(model: nn.Module, parts: EncoderParts, inputs: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, ...]:
    if hasattr(model, "qa_outputs"):
        ids, mask, types = inputs
        out: Any = model(input_ids=ids, attention_mask=mask, token_type_ids=types if parts.uses_token_types else None)
    else:
        out = model(*inputs)
    if hasattr(out, "start_logits"):
        return out.start_logits, out.end_logits
    if isinstance(out, tuple | list) and len(out) >= 2 and all(isinstance(o, Tensor) for o in out[:2]):
        return out[0], out[1]
    raise TraceError(f"the model returned {type(out).__name__}; a QA model returns (start_logits, end_logits)")


def _examples(
    per_rank: Sequence[Sequence[nn.Module]], inputs: tuple[Tensor, ...]
) -> tuple[list[tuple[Tensor, ...]], tuple[Tensor, ...]]:
    """Each segment's example inputs (rank 0's state, partials summed as the all-reduce does) and the outputs."""
    examples: list[tuple[Tensor, ...]] = [inputs]
    states = [segments[0](*inputs) for segments in per_rank]
    for step in range(1, len(per_rank[0])):
        reduced = torch.stack([state[2] for state in states]).sum(0)
        examples.append((states[0][0], states[0][1], reduced))
        states = [segments[step](state[0], state[1], reduced) for segments, state in zip(per_rank, states, strict=True)]
    return examples, tuple(states[0])


def _latency_us(traced: torch.jit.ScriptModule) -> float:
    from neuron_emu.runtime import cost_plan

    return float(cost_plan(traced).totals["latency_us"])


def _representative_latency_us(
    parts: EncoderParts, degree: int, examples: Sequence[tuple[Tensor, ...]], compiler_args: str
) -> float:
    """Rank 0's compute at `degree` from one segment of each kind (all layers have the same shapes)."""
    from neuron_emu.tracing import trace as neuron_trace

    segments = rank_segments(parts, degree, 0)
    layers = len(parts.layers)
    weights = {0: 1, 1: layers, len(segments) - 1: 1}
    if layers > 1:
        weights[2] = layers - 1
    return sum(
        count * _latency_us(neuron_trace(segments[i], examples[i], compiler_args=compiler_args))
        for i, count in weights.items()
    )


def trace(
    model: nn.Module,
    example_inputs: Sequence[Tensor],
    *,
    tp_degree: int,
    compiler_args: str | Sequence[str] | None = None,
    instance_type: str | None = None,
    compiler_workdir: str | os.PathLike[str] | None = None,
    links: Mapping[str, InstanceLinks] | None = None,
    threads_per_worker: int = 1,
) -> ParallelModel:
    """Shard `model` (a BERT-family QA model, eval mode) over `tp_degree` emulated NeuronCores.

    Returns a ParallelModel called as `(input_ids, attention_mask, token_type_ids) -> (start, end)`; its workers
    start on the first call. `instance_type` (else the largest instance of `--target`, else of all) bounds the
    degree; `links` replaces neuron_emu/data/interconnect.json for the plan.
    """
    from neuron_emu.tracing import trace as neuron_trace

    options = parse_compiler_args(compiler_args)
    args = options.text()
    table = dict(interconnect()) if links is None else dict(links)
    parts = encoder_parts(model)
    degree = check_degree(parts, tp_degree)
    check_cores(degree, instance_type, options, table)
    inputs = _inputs(example_inputs)

    per_rank = [rank_segments(parts, degree, rank) for rank in range(degree)]
    with torch.no_grad():
        expected = _reference(model, parts, inputs)
        examples, sharded = _examples(per_rank, inputs)
    worst = max(float((a - b).abs().max()) for a, b in zip(expected, sharded, strict=True))
    scale = max(1.0, max(float(t.abs().max()) for t in expected))
    if worst > EAGER_TOLERANCE * scale:
        raise TraceError(
            f"the sharded model disagrees with the model's own forward (max |difference| {worst:.2e}): "
            "is it a standard BERT-family QA model?"
        )

    shards: list[torch.jit.ScriptModule] = []
    rank0_latency = 0.0
    for rank, segments in enumerate(per_rank):
        traced = [
            neuron_trace(segment, example, compiler_args=args)
            for segment, example in zip(segments, examples, strict=True)
        ]
        if rank == 0:
            rank0_latency = sum(_latency_us(t) for t in traced)
        shards.append(script_shard(traced, rank, degree))

    allowed = divisors(math.gcd(parts.heads, parts.intermediate))
    points = [(degree, rank0_latency)]
    other = 1 if degree > 1 else next((d for d in allowed if d > 1), None)
    if other is not None:
        points.append((other, _representative_latency_us(parts, other, examples, args)))
    replicated_us, sharded_us = fit_compute(points)
    weights = weight_split(parts, options)
    batch, length = (int(s) for s in inputs[0].shape)
    element = {"bf16": 2, "fp16": 2, "tf32": 4, "fp8_e4m3": 1}[options.auto_cast_type] if options.casts_all else 4
    profile = ShardProfile(
        model=parts.describe(),
        batch_size=batch,
        sequence_length=length,
        compiler_args=args,
        traced_degree=degree,
        candidate_degrees=allowed,
        compute_replicated_us=replicated_us,
        compute_sharded_us=sharded_us,
        replicated_weight_bytes=weights.replicated_bytes,
        sharded_weight_bytes=weights.sharded_bytes,
        allreduces=2 * len(parts.layers),
        allreduce_bytes=batch * length * parts.hidden * element,
    )
    plan = parallel_plan(profile, table)
    if compiler_workdir is not None:
        directory = Path(compiler_workdir)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "parallel_plan.json").write_text(plan.to_json() + "\n")
        (directory / "parallel_plan.txt").write_text(plan.to_text())
    manifest = Manifest(
        tp_degree=degree,
        segments=len(per_rank[0]),
        input_shapes=[list(x.shape) for x in inputs],
        input_dtypes=[str(x.dtype).removeprefix("torch.") for x in inputs],
        output_shapes=[list(t.shape) for t in sharded],
        compiler_args=args,
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        model=parts.describe(),
    )
    return ParallelModel(manifest, plan, shards=shards, threads_per_worker=threads_per_worker)
