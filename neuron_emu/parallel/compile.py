"""`neuron_emu.parallel.trace`: compile a BERT-family encoder model tensor-parallel over N emulated NeuronCores.

The model may be any torch module holding one BERT-family encoder (neuron_emu.parallel.encoder), whatever its head:
a bare Hugging Face model (BertModel, BertForSequenceClassification, DistilBertForTokenClassification,
RobertaForQuestionAnswering, ...) or a user wrapper whose forward(input_ids, attention_mask[, token_type_ids])
calls such an encoder somewhere inside. The encoder's layers are sharded; the last segment runs the rest of the
model (neuron_emu.parallel.head). Before tracing, the sharded model run eagerly must equal the model's own forward
(EAGER_TOLERANCE); whether token_type_ids reach the encoder is settled the same way, by comparing outputs.
Every rank's graphs are traced with `neuron_emu.trace` (same auto-cast numerics and cost plans as a single-core
trace), so a sharded model and the single-core traced model differ only in how partial sums are added up.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from neuron_emu.compiler_args import CompilerOptions, parse_compiler_args
from neuron_emu.errors import NeuronEmuError, TraceError
from neuron_emu.hardware import target_instances
from neuron_emu.parallel.artifact import Manifest, script_shard
from neuron_emu.parallel.cost import InstanceLinks, ShardProfile, fit_compute, interconnect, parallel_plan
from neuron_emu.parallel.encoder import EncoderParts, encoder_parts
from neuron_emu.parallel.head import HeadModel, flatten_outputs
from neuron_emu.parallel.module import ParallelModel
from neuron_emu.parallel.shard import (
    check_degree,
    divisors,
    rank_segments,
    run_in_process,
    run_stepwise,
    set_token_types,
    weight_split,
)

Tensor = torch.Tensor
# The eager sharded model must equal the model's own forward up to fp32 summation order.
EAGER_TOLERANCE = 1e-4


def _inputs(example_inputs: Sequence[Tensor]) -> tuple[Tensor, ...]:
    if isinstance(example_inputs, Tensor) or len(example_inputs) not in (2, 3):
        raise TraceError(
            "example_inputs must be (input_ids, attention_mask) or (input_ids, attention_mask, token_type_ids)"
        )
    inputs = tuple(example_inputs)
    for index, x in enumerate(inputs):
        if not isinstance(x, Tensor) or x.dim() != 2 or x.dtype.is_floating_point or x.device.type != "cpu":
            raise TraceError(f"example input {index} must be a 2-D integer CPU tensor [batch, sequence]")
    if len({tuple(x.shape) for x in inputs}) != 1:
        raise TraceError(f"example inputs differ in shape: {[list(x.shape) for x in inputs]}")
    return inputs


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


def reference(model: nn.Module, inputs: tuple[Tensor, ...]) -> tuple[str, tuple[Tensor, ...]]:
    """The model's own forward on `inputs`, called positionally as neuron_emu.trace calls it: (kind, outputs)."""
    try:
        with torch.no_grad():
            out = model(*inputs)
    except NeuronEmuError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise TraceError(
            f"the model's own forward failed on the example inputs: {type(exc).__name__}: {first}"
        ) from None
    return flatten_outputs(out)


def _difference(expected: Sequence[Tensor], got: Sequence[Tensor]) -> tuple[float, float]:
    """(max |difference|, the scale it is measured against); infinite when the outputs do not line up."""
    scale = max([1.0, *(float(t.detach().double().abs().max()) for t in expected if t.numel())])
    if len(expected) != len(got) or any(a.shape != b.shape for a, b in zip(expected, got, strict=False)):
        return math.inf, scale
    worst = max(
        [0.0, *(float((a.double() - b.double()).abs().max()) for a, b in zip(expected, got, strict=True) if a.numel())]
    )
    return worst, scale


def _probe(inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The example inputs if their token types already vary, else the same with type 1 on the second half of
    every row (a sentence pair): what tells apart a forward that passes token types on from one that does not."""
    ids, mask, types = inputs
    if bool((types != 0).any()):
        return inputs
    length = types.shape[1]
    pattern = (torch.arange(length) >= length // 2).to(types.dtype)
    return ids, mask, pattern.expand_as(types).contiguous()


def _token_types(
    model: nn.Module,
    parts: EncoderParts,
    inputs: tuple[Tensor, ...],
    per_rank: Sequence[Sequence[nn.Module]],
    expected: tuple[Tensor, ...],
) -> bool:
    """Whether the model's forward hands token_type_ids to its encoder: what the model declares
    (`uses_token_types`), else whichever choice makes the sharded model agree with the model's own forward."""
    if len(inputs) < 3 or parts.token_type_vocab == 0:
        return False
    if parts.token_types_declared:
        return parts.uses_token_types
    if parts.token_type_vocab < 2:
        return False  # type 0 is the only one: passing them on or not computes the same
    probe = _probe(inputs)
    target = expected if probe is inputs else reference(model, probe)[1]
    errors: dict[bool, float] = {}
    for enabled in (True, False):
        set_token_types(per_rank, enabled)
        errors[enabled] = _difference(target, run_in_process(per_rank, probe))[0]
    return errors[True] <= errors[False]


def _check_head_calls(head: HeadModel, parts: EncoderParts, degree: int) -> None:
    """The model's forward ran its encoder once per call, reaching it through the module tree (else the stubbed
    copy in the head does not replace it, and the head would not be the rest of the model)."""
    where = repr(parts.path) if parts.path else "the model itself"
    if head.slot.calls == 0:
        raise TraceError(
            f"the model's forward did not reach its encoder at {where} through its module tree; "
            "neuron_emu.parallel cannot separate its head from its encoder"
        )
    if head.slot.calls > degree:
        raise TraceError(
            f"the model's forward runs its encoder at {where} {head.slot.calls / degree:g} times per call; "
            "neuron_emu.parallel shards models that run it once"
        )


def _check_agreement(expected: tuple[Tensor, ...], sharded: tuple[Tensor, ...]) -> None:
    worst, scale = _difference(expected, sharded)
    if worst > EAGER_TOLERANCE * scale:
        detail = "different outputs" if math.isinf(worst) else f"max |difference| {worst:.2e}"
        raise TraceError(
            f"the sharded model disagrees with the model's own forward ({detail}): does its forward run a standard "
            "BERT-family encoder on its inputs as given and use only the encoder's final hidden state?"
        )


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
    """Shard `model` (holding one BERT-family encoder, eval mode) over `tp_degree` emulated NeuronCores.

    `example_inputs` are (input_ids, attention_mask[, token_type_ids]), passed to the model positionally as
    neuron_emu.trace passes them. Returns a ParallelModel called the same way that returns what neuron_emu.trace
    of the model returns (a Tensor if the model returns one, else a tuple; a ModelOutput's values as a tuple); its
    workers start on the first call. `instance_type` (else the largest instance of `--target`, else of all)
    bounds the degree; `links` replaces neuron_emu/data/interconnect.json for the plan.
    """
    from neuron_emu.tracing import trace as neuron_trace

    options = parse_compiler_args(compiler_args)
    args = options.text()
    table = dict(interconnect()) if links is None else dict(links)
    parts = encoder_parts(model)
    degree = check_degree(parts, tp_degree)
    check_cores(degree, instance_type, options, table)
    inputs = _inputs(example_inputs)
    kind, expected = reference(model, inputs)

    head = HeadModel(parts)
    per_rank = [rank_segments(parts, degree, rank, head) for rank in range(degree)]
    with torch.no_grad():
        parts = replace(parts, uses_token_types=_token_types(model, parts, inputs, per_rank, expected))
        set_token_types(per_rank, parts.uses_token_types)
        head.slot.calls = 0
        examples, sharded = run_stepwise(per_rank, inputs)
    _check_head_calls(head, parts, degree)
    _check_agreement(expected, sharded)

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
        output_kind=kind,
    )
    return ParallelModel(manifest, plan, shards=shards, threads_per_worker=threads_per_worker)
