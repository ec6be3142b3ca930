"""`trace`, `trace_buckets` and `analyze`: the torch_neuronx tracing workflow, emulated on a CPU.

A trace records the model with torch.jit.trace (fixed shapes and control flow, as on Neuron), applies
the auto-cast rounding of the compiler arguments, checks every op against what NeuronCores run,
attaches a cost plan and wraps the graph in a TorchScript module that takes and returns CPU tensors.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn.utils.stateless import _reparametrize_module

from neuron_emu.autocast import AutoCastMode, inline_autograd_functions
from neuron_emu.compiler_args import CompilerOptions, parse_compiler_args
from neuron_emu.cost.core_spec import neuroncore_v2
from neuron_emu.cost.graph import GraphOp, TensorMeta, graph_ops
from neuron_emu.cost.kernels import match_calls
from neuron_emu.cost.plan import CostPlan, build_plan
from neuron_emu.cost.rules import BUILTIN_NAMESPACES, classify, split_kind
from neuron_emu.custom_op.library import loaded_libraries
from neuron_emu.custom_op.profile import recording
from neuron_emu.errors import NeuronEmuError, TraceError
from neuron_emu.graph_modules import Entry, NeuronBuckets, NeuronGraph
from neuron_emu.rounding import round_to

Tensor = torch.Tensor
Inputs = Tensor | Sequence[Tensor]
EMULATOR_VERSION = "neuron_emu 0.1.0"


class _Capture(torch.nn.Module):
    """What torch.jit.trace records: the model on a list of inputs, returning a list of tensors."""

    call: Callable[..., Any]

    def __init__(self, call: Callable[..., Any], round_inputs_to: str | None) -> None:
        super().__init__()
        object.__setattr__(self, "call", call)
        self.round_inputs_to = round_inputs_to
        self.output_kind = "tensor"
        self.output_shapes: list[tuple[int, ...]] = []
        self.output_dtypes: list[torch.dtype] = []

    def forward(self, xs: list[Tensor]) -> list[Tensor]:
        if self.round_inputs_to is not None:
            xs = [round_to(x, self.round_inputs_to) for x in xs]
        out = self.call(*xs)
        if isinstance(out, Tensor):
            outs, self.output_kind = [out], "tensor"
        elif isinstance(out, tuple | list) and out and all(isinstance(o, Tensor) for o in out):
            outs, self.output_kind = list(out), "tuple"
        else:
            raise TraceError(
                f"the model returned {type(out).__name__}; "
                "neuron_emu.trace needs a Tensor or a tuple of Tensors "
                "(wrap the model so it returns a tuple)"
            )
        self.output_shapes = [tuple(o.shape) for o in outs]
        self.output_dtypes = [o.dtype for o in outs]
        return outs


@dataclass
class _Session:
    """State shared by the traces of one compile: weight copies and their rounded versions."""

    copies: dict[int, dict[str, Tensor]] = field(default_factory=dict)
    rounded: dict[int, Tensor] = field(default_factory=dict)

    def weights(self, module: torch.nn.Module) -> dict[str, Tensor]:
        """Detached copies of the module's weights: the graph owns them, as the compiled NEFF does."""
        key = id(module)
        if key not in self.copies:
            named = {**dict(module.named_parameters()), **dict(module.named_buffers())}
            self.copies[key] = {name: t.detach().clone() for name, t in named.items()}
        return self.copies[key]


@dataclass
class _Traced:
    graph: torch.jit.ScriptModule
    output_kind: str
    output_shapes: list[tuple[int, ...]]
    output_dtypes: list[torch.dtype]
    ops: list[GraphOp]
    custom: dict[str, bool]
    plan: CostPlan


def _normalize_inputs(example_inputs: Inputs) -> tuple[Tensor, ...]:
    if isinstance(example_inputs, Tensor):
        inputs: tuple[Any, ...] = (example_inputs,)
    elif isinstance(example_inputs, tuple | list):
        inputs = tuple(example_inputs)
    else:
        raise TraceError(f"example_inputs must be a Tensor or a tuple of Tensors, got {type(example_inputs).__name__}")
    if not inputs or not all(isinstance(x, Tensor) for x in inputs):
        raise TraceError("example_inputs must be a Tensor or a non-empty tuple of Tensors (passed positionally)")
    for i, x in enumerate(inputs):
        if x.device.type != "cpu":
            raise TraceError(f"example input {i} is on {x.device}; Neuron traced models take CPU tensors")
    return inputs


@contextlib.contextmanager
def _weights_swapped(func: Callable[..., Any], session: _Session) -> Iterator[Callable[..., Any]]:
    """Trace `func` with its weights replaced by the session's copies (they become the graph's constants)."""
    if isinstance(func, torch.nn.Module) and not isinstance(func, torch.jit.ScriptModule):
        if func.training:
            raise TraceError("call model.eval() before tracing: a NeuronCore graph is inference-only")
        with _reparametrize_module(func, session.weights(func), tie_weights=True):
            yield func
        return
    if not callable(func):
        raise TraceError(f"cannot trace {type(func).__name__}: pass a torch.nn.Module or a function")
    yield func


def _run_trace(capture: _Capture, inputs: tuple[Tensor, ...], mode: AutoCastMode) -> torch.jit.ScriptModule:
    active: contextlib.AbstractContextManager[Any] = (
        mode if mode.options.auto_cast != "none" else contextlib.nullcontext()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        try:
            with active:
                graph: torch.jit.ScriptModule = torch.jit.trace(capture, ([*inputs],), check_trace=False, strict=False)
        except NeuronEmuError:
            raise
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TraceError(f"tracing the model failed: {type(exc).__name__}: {first}") from None
    return graph


def _trace_graph(
    func: Callable[..., Any],
    inputs: tuple[Tensor, ...],
    options: CompilerOptions,
    session: _Session,
) -> _Traced:
    with _weights_swapped(func, session) as call, torch.no_grad(), inline_autograd_functions():
        constants: dict[int, Tensor] = {}
        if isinstance(func, torch.nn.Module) and id(func) in session.copies:
            constants = {id(t): t for t in session.copies[id(func)].values()}
        capture = _Capture(call, options.auto_cast_type if options.casts_all else None)
        # Tracing runs every kernel once: the access profile of each custom-op call prices it in the plan.
        with recording() as calls:
            graph = _run_trace(capture, inputs, AutoCastMode(options, constants, session.rounded))
    ops = graph_ops(graph.graph)
    namespaces = {split_kind(op.kind)[0] for op in ops} - BUILTIN_NAMESPACES
    libraries = loaded_libraries()
    custom = {ns: libraries[ns].multicore for ns in sorted(namespaces) if ns in libraries}
    if len(custom) > 1:
        raise TraceError(
            f"the model calls ops from {len(custom)} custom-op libraries ({', '.join(custom)}); "
            "a Neuron model may use one custom-op library"
        )
    metas = [TensorMeta(tuple(x.shape), str(x.dtype).removeprefix("torch."), False) for x in inputs]
    plan = build_plan(ops, metas, options, neuroncore_v2(), custom, kernel_profiles=match_calls(ops, custom, calls))
    return _Traced(graph, capture.output_kind, capture.output_shapes, capture.output_dtypes, ops, custom, plan)


def _require_supported(traced: _Traced) -> None:
    if not traced.plan.unsupported:
        return
    first = traced.plan.unsupported[0]
    more = len(traced.plan.unsupported) - 1
    where = f" at {first['call']}" if first["call"] else ""
    tail = f" (and {more} more; see neuron_emu.analyze)" if more else " (see neuron_emu.analyze)"
    raise TraceError(f"NeuronCores cannot run {first['kind']}{where}: {first['reason']}{tail}")


def _batchable(inputs: Sequence[Tensor], output_shapes: Sequence[tuple[int, ...]]) -> bool:
    if any(x.dim() == 0 for x in inputs) or any(len(s) == 0 for s in output_shapes):
        return False
    batch = inputs[0].shape[0]
    return all(x.shape[0] == batch for x in inputs) and all(s[0] == batch for s in output_shapes)


def _neuron_graph(traced: _Traced, inputs: Sequence[Tensor], options: CompilerOptions) -> torch.jit.ScriptModule:
    module = NeuronGraph(
        traced.graph,
        list(inputs),
        [
            torch.empty(shape, dtype=dtype)
            for shape, dtype in zip(traced.output_shapes, traced.output_dtypes, strict=True)
        ],
        batchable=_batchable(inputs, traced.output_shapes),
        compiler_args=options.text(),
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        plan_json=traced.plan.to_json(),
        custom_op_namespaces=sorted(traced.custom),
    )
    scripted: torch.jit.ScriptModule = torch.jit.script(module)
    return scripted


def _entry(
    neuron: torch.jit.ScriptModule, graphs: Sequence[Any], output_kind: str, inputs: Sequence[Tensor]
) -> torch.jit.ScriptModule:
    """Trace the entry module around `neuron` without running the graphs (they answer with dummy outputs)."""
    for graph in graphs:
        graph.dry_run = True
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            entry: torch.jit.ScriptModule = torch.jit.trace(
                Entry(neuron, output_kind), tuple(inputs), check_trace=False, strict=False
            )
    finally:
        for graph in graphs:
            graph.dry_run = False
    return entry


def _write_workdir(workdir: str | os.PathLike[str], name: str, traced: _Traced, options: CompilerOptions) -> None:
    directory = Path(workdir)
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        f"{name}graph.txt": str(traced.graph.graph),
        f"{name}cost_plan.json": traced.plan.to_json() + "\n",
        f"{name}cost_plan.txt": traced.plan.to_text(),
        f"{name}log-neuron-cc.txt": f"{EMULATOR_VERSION}: compiled with {options.text()}\n"
        + (f"ignored: {', '.join(options.no_effect)}\n" if options.no_effect else ""),
    }
    for file_name, text in files.items():
        target = directory / file_name
        partial = target.with_name(f".{file_name}.tmp-{os.getpid()}")
        partial.write_text(text)
        os.replace(partial, target)


def trace(
    func: Callable[..., Any],
    example_inputs: Inputs,
    *_: Any,
    input_output_aliases: Mapping[Any, Any] | None = None,
    compiler_workdir: str | os.PathLike[str] | None = None,
    compiler_args: str | Sequence[str] | None = None,
    partitioner_config: Any = None,
    inline_weights_to_neff: bool = True,
    cpu_backend: bool = False,
) -> torch.jit.ScriptModule:
    """Trace `func` on `example_inputs` for a NeuronCore; returns a ScriptModule to call, save and load.

    Same arguments as torch_neuronx.trace. Without compiler_args the compiler defaults apply:
    `--auto-cast matmult --auto-cast-type bf16`.
    """
    if _:
        raise TraceError("neuron_emu.trace takes func and example_inputs positionally; the rest are keywords")
    if input_output_aliases:
        raise TraceError("input_output_aliases (device-resident state tensors) are not emulated")
    if partitioner_config is not None:
        raise TraceError("partitioner_config (CPU fallback for unsupported ops) is not emulated")
    options = parse_compiler_args(compiler_args)
    inputs = _normalize_inputs(example_inputs)
    traced = _trace_graph(func, inputs, options, _Session())
    _require_supported(traced)
    if compiler_workdir is not None:
        _write_workdir(compiler_workdir, "", traced, options)
    neuron = _neuron_graph(traced, inputs, options)
    return _entry(neuron, [neuron], traced.output_kind, inputs)


def _per_input(value: int | Sequence[int | None] | None, count: int, default: int, what: str) -> list[int]:
    if value is None:
        return [default] * count
    if isinstance(value, int):
        return [value] * count
    values = [-1 if v is None else int(v) for v in value]
    if len(values) != count:
        raise TraceError(f"{what} has {len(values)} entries for {count} inputs")
    return values


def trace_buckets(
    func: Callable[..., Any],
    example_inputs: Sequence[Inputs],
    *,
    seq_dim: int | Sequence[int | None] = 1,
    pad_values: int | Sequence[int] | None = None,
    output_seq_dims: Sequence[int | None] | None = None,
    compiler_args: str | Sequence[str] | None = None,
    compiler_workdir: str | os.PathLike[str] | None = None,
) -> torch.jit.ScriptModule:
    """Trace one graph per sequence-length bucket (one example input set per bucket) into a single module.

    At inference the module pads the sequence inputs (`seq_dim` per input, None for inputs without one) with
    `pad_values` up to the smallest bucket that fits, runs that bucket's graph, and trims the outputs
    listed in `output_seq_dims` back to the input length. Weights are stored once for all buckets.
    """
    if isinstance(example_inputs, Tensor) or not example_inputs:
        raise TraceError("trace_buckets needs a list with one example input (tuple) per bucket")
    options = parse_compiler_args(compiler_args)
    per_bucket = [_normalize_inputs(x) for x in example_inputs]
    count = len(per_bucket[0])
    if any(len(x) != count for x in per_bucket):
        raise TraceError("every bucket's example inputs must have the same number of tensors")
    seq_dims = _per_input(seq_dim, count, 1, "seq_dim")
    if all(d < 0 for d in seq_dims):
        raise TraceError("trace_buckets needs at least one input with a sequence dimension")
    first_seq = next(i for i, d in enumerate(seq_dims) if d >= 0)
    lengths = [x[first_seq].shape[seq_dims[first_seq]] for x in per_bucket]
    if len(set(lengths)) != len(lengths):
        raise TraceError(f"bucket lengths must differ, got {lengths}")
    order = sorted(range(len(per_bucket)), key=lambda i: lengths[i])
    pads = _per_input(pad_values, count, 0, "pad_values")
    session = _Session()
    graphs: list[torch.jit.ScriptModule] = []
    output_kind = "tensor"
    for i in order:
        traced = _trace_graph(func, per_bucket[i], options, session)
        _require_supported(traced)
        if compiler_workdir is not None:
            _write_workdir(compiler_workdir, f"bucket{lengths[i]}_", traced, options)
        graphs.append(_neuron_graph(traced, per_bucket[i], options))
        output_kind = traced.output_kind
    out_dims = [-1 if d is None else int(d) for d in (output_seq_dims or [])]
    buckets = NeuronBuckets(graphs, [lengths[i] for i in order], seq_dims, pads, out_dims)
    scripted: torch.jit.ScriptModule = torch.jit.script(buckets)
    members = [graph for _, graph in sorted(scripted.graphs.named_children(), key=lambda item: int(item[0]))]
    return _entry(scripted, members, output_kind, per_bucket[order[0]])


def analyze(
    func: Callable[..., Any],
    example_inputs: Inputs,
    compiler_workdir: str | os.PathLike[str] | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Which ops of `func` NeuronCores support, in torch_neuronx.analyze's report format."""
    options = parse_compiler_args("--auto-cast none")
    inputs = _normalize_inputs(example_inputs)
    traced = _trace_graph(func, inputs, options, _Session())
    supported: dict[str, int] = {}
    counted = 0
    for op in traced.ops:
        decision = classify(op, traced.custom)
        if op.autocast or decision.unsupported:
            continue
        counted += 1
        supported[op.kind] = supported.get(op.kind, 0) + 1
    unsupported = [
        {
            "kind": u["kind"],
            "failureAt": "neuron_emu",
            "reason": u["reason"],
            "call": u["call"],
            "opGraph": u["opGraph"],
        }
        for u in traced.plan.unsupported
    ]
    total = counted + len(unsupported)
    report = {
        "torch_neuronx_version": f"{EMULATOR_VERSION} (emulated)",
        "neuronx_cc_version": f"{EMULATOR_VERSION} (emulated)",
        "support_percentage": f"{100.0 * counted / total if total else 100.0:.2f}%",
        "supported_operators": supported,
        "unsupported_operators": unsupported,
    }
    if compiler_workdir is not None:
        directory = Path(compiler_workdir)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "analyze.json").write_text(json.dumps(report, indent=2) + "\n")
    return report
