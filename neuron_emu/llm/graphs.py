"""The traced graphs of a compiled decoder: per bucket a context-encoding step and a token-generation step.

Each segment (neuron_emu.llm.segments) is traced with neuron_emu.trace, so it gets the same fixed shapes, auto-cast
numerics (`--auto-cast matmult --auto-cast-type bf16` rounds matmul operands, `--auto-cast none` keeps fp32), op
checks and cost plan as any neuron_emu graph. Context encoding needs every segment per bucket (the prompt's padded
length is each graph's first dimension); token generation needs only `attention` per bucket (how much of the cache
it reads), its other segments see [batch_size, hidden] whatever the bucket and are traced once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import torch

from neuron_emu.llm.segments import SEGMENTS, GraphSpec, segment
from neuron_emu.llm.shard import RankWeights

Tensor = torch.Tensor
Graph = Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]


@dataclass(frozen=True)
class StepGraphs:
    """The segments one step runs, in order (see neuron_emu.llm.segments)."""

    embed: Graph
    attention: Graph
    mlp: Graph
    finish: Graph
    head: Graph


@dataclass(frozen=True)
class GraphSet:
    context: dict[int, StepGraphs]
    token: dict[int, StepGraphs]

    def named(self) -> Iterator[tuple[str, Graph]]:
        """Every distinct graph under its name: `context<L>.<segment>`, `token.<segment>`, `token<L>.attention`."""
        for bucket, graphs in self.context.items():
            for name in SEGMENTS:
                yield f"context{bucket}.{name}", getattr(graphs, name)
        first = next(iter(self.token.values()))
        for name in SEGMENTS:
            if name != "attention":
                yield f"token.{name}", getattr(first, name)
        for bucket, graphs in self.token.items():
            yield f"token{bucket}.attention", graphs.attention

    @classmethod
    def from_named(cls, graphs: Mapping[str, Graph], buckets: tuple[int, ...]) -> GraphSet:
        """The inverse of `named` (KeyError for a missing graph)."""
        context = {b: StepGraphs(*(graphs[f"context{b}.{name}"] for name in SEGMENTS)) for b in buckets}
        shared = {name: graphs[f"token.{name}"] for name in SEGMENTS if name != "attention"}
        token = {b: StepGraphs(**shared, attention=graphs[f"token{b}.attention"]) for b in buckets}
        return cls(context, token)


def available(rank: RankWeights) -> set[str]:
    return set(rank.model) | set(rank.layers[0])


def _weights(rank: RankWeights, names: tuple[str, ...]) -> tuple[Tensor, ...]:
    layer = rank.layers[0]
    return tuple(layer[name] if name in layer else rank.model[name] for name in names)


def _activations(spec: GraphSpec, name: str, rows: int, context: bool, cache_dtype: torch.dtype) -> tuple[Tensor, ...]:
    """Example inputs of a segment (their values do not matter: shapes and dtypes are what a trace fixes)."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, spec.hidden, generator=generator)
    cache = torch.zeros(spec.batch_size, spec.kv_heads, spec.max_length, spec.head_dim, dtype=cache_dtype)
    if name == "embed":
        positions = torch.arange(rows) if context else torch.zeros(rows, dtype=torch.int64)
        return torch.zeros(rows, dtype=torch.int64), positions
    if name == "attention" and context:
        return x, torch.zeros(1, dtype=torch.int64), cache, cache.clone()
    if name == "attention":
        positions = torch.zeros(rows, dtype=torch.int64)
        return x, positions, torch.ones(rows, dtype=torch.bool), cache, cache.clone()
    if name == "head":
        return (x, torch.tensor([rows - 1])) if context else (x,)
    return x, torch.randn(rows, spec.hidden, generator=generator)


def trace_graphs(
    spec: GraphSpec, rank: RankWeights, buckets: tuple[int, ...], compiler_args: str, cache_dtype: torch.dtype
) -> GraphSet:
    """Trace every graph of the decoder with rank `rank`'s weights as the example weights."""
    from neuron_emu.tracing import trace

    names = available(rank)

    def traced(name: str, *, context: bool, bucket: int, rows: int) -> Graph:
        module = segment(spec, name, names, context=context, bucket=bucket)
        example = (*_activations(spec, name, rows, context, cache_dtype), *_weights(rank, module.names))
        graph: Graph = trace(module, example, compiler_args=compiler_args)
        return graph

    context = {b: StepGraphs(*(traced(name, context=True, bucket=b, rows=b) for name in SEGMENTS)) for b in buckets}
    rows = spec.batch_size
    shared = {
        name: traced(name, context=False, bucket=buckets[-1], rows=rows) for name in SEGMENTS if name != "attention"
    }
    token = {
        b: StepGraphs(**shared, attention=traced("attention", context=False, bucket=b, rows=rows)) for b in buckets
    }
    return GraphSet(context, token)
