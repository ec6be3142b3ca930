#!/usr/bin/env python3
"""Tensor parallelism over emulated NeuronCores: per-request time measured here against the cost model's estimate.

    .venv/bin/python scripts/bench_neuron_parallel.py [--degrees 1 2 4] [--out .sagebox/bench/neuron_parallel.json]

A BERT QA model (BERT-base dimensions by default, random weights: numerics do not matter for timing) is traced
by neuron_emu.parallel at each degree and served by its worker processes (one per rank, one intra-op thread
each). Requests go round-robin over the degrees (and an in-process single-core neuron_emu.trace baseline), so
all see the same machine load; medians are reported. Next to them: the cost model's per-request ESTIMATE for each
Neuron instance type at the same degree. The measured times say how the emulator behaves on this CPU (processes
and gloo over loopback standing in for NeuronCores and NeuronLink), not how fast Neuron hardware is.
Imports only neuron_emu, torch, transformers and the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import BertConfig, BertForQuestionAnswering

import neuron_emu
from neuron_emu import parallel

DEFAULT_OUT = Path(".sagebox/bench/neuron_parallel.json")
DEFAULT_ARGS = "--auto-cast matmult --auto-cast-type bf16"


class QA(torch.nn.Module):
    """(input_ids, attention_mask, token_type_ids) -> (start_logits, end_logits), as Sagebox serves QA models."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.start_logits, out.end_logits


def build_model(args: argparse.Namespace) -> QA:
    torch.manual_seed(args.seed)
    config = BertConfig(
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.intermediate,
    )
    return QA(BertForQuestionAnswering(config)).eval()


def make_inputs(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 30000, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    types = torch.zeros(batch, length, dtype=torch.long)
    types[:, length // 2 :] = 1
    return ids, mask, types


def _ms(values: list[float]) -> float:
    return round(statistics.median(values) / 1000.0, 3)


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(1)  # the in-process baseline uses one core, like one worker
    model = build_model(args)
    inputs = make_inputs(args.batch, args.seq, args.seed + 1)
    began = time.perf_counter()
    single = neuron_emu.trace(model, inputs, compiler_args=args.compiler_args)
    single_trace_s = time.perf_counter() - began
    reference = single(*inputs)
    with torch.no_grad():
        cpu = model(*inputs)
    single_vs_cpu = max(float((o - c).abs().max()) for o, c in zip(reference, cpu, strict=True))

    sharded: dict[int, parallel.ParallelModel] = {}
    compile_s: dict[int, float] = {}
    start_s: dict[int, float] = {}
    try:
        for degree in args.degrees:
            began = time.perf_counter()
            sharded[degree] = parallel.trace(model, inputs, tp_degree=degree, compiler_args=args.compiler_args)
            compile_s[degree] = time.perf_counter() - began
            began = time.perf_counter()
            sharded[degree].start()
            start_s[degree] = time.perf_counter() - began
        names = ["single", *args.degrees]
        wall: dict[Any, list[float]] = {name: [] for name in names}
        compute: dict[int, list[float]] = {d: [] for d in args.degrees}
        collective: dict[int, list[float]] = {d: [] for d in args.degrees}
        worst: dict[int, float] = {}
        worst_cpu: dict[int, float] = {}
        for round_index in range(args.warmup + args.requests):
            for name in names:
                runner = single if name == "single" else sharded[int(name)]
                began = time.perf_counter()
                outputs = runner(*inputs)
                elapsed_us = (time.perf_counter() - began) * 1e6
                if round_index < args.warmup:
                    continue
                wall[name].append(elapsed_us)
                if name != "single":
                    degree = int(name)
                    rank0 = sharded[degree].last_timing["chunks"][0][0]
                    compute[degree].append(rank0["run_us"] - rank0["collective_us"])
                    collective[degree].append(rank0["collective_us"])
                    diff = max(float((o - r).abs().max()) for o, r in zip(outputs, reference, strict=True))
                    worst[degree] = max(worst.get(degree, 0.0), diff)
                    diff = max(float((o - c).abs().max()) for o, c in zip(outputs, cpu, strict=True))
                    worst_cpu[degree] = max(worst_cpu.get(degree, 0.0), diff)
        plan = sharded[args.degrees[-1]].plan
    finally:
        for model_ in sharded.values():
            model_.close()

    measured = [
        {
            "tp_degree": degree,
            "per_request_ms": _ms(wall[degree]),
            "rank0_compute_ms": _ms(compute[degree]),
            "rank0_all_reduce_ms": _ms(collective[degree]),
            "max_abs_diff_vs_single_core": worst[degree],
            "max_abs_diff_vs_cpu_fp32": worst_cpu[degree],
            "compile_s": round(compile_s[degree], 1),
            "worker_start_s": round(start_s[degree], 1),
        }
        for degree in args.degrees
    ]
    estimates = []
    for instance in plan.instances:
        row: dict[str, Any] = {"instance_type": instance.instance_type, "neuron_cores": instance.neuron_cores}
        for degree in args.degrees:
            cost = instance.at(degree)
            row[f"tp{degree}_ms"] = round(cost.latency_us / 1000.0, 4) if cost else None
            row[f"tp{degree}_collective_ms"] = round(cost.collective_us / 1000.0, 4) if cost else None
        row["fastest_degree"] = instance.fastest_degree
        estimates.append(row)
    return {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "load_average_at_end": list(os.getloadavg()),
        },
        "model": {
            "layers": args.layers,
            "hidden": args.hidden,
            "heads": args.heads,
            "intermediate": args.intermediate,
            "weights": "random (seeded)",
        },
        "batch": args.batch,
        "sequence": args.seq,
        "compiler_args": args.compiler_args,
        "requests": args.requests,
        "single_core_in_process_ms": _ms(wall["single"]),
        "single_core_max_abs_diff_vs_cpu_fp32": single_vs_cpu,
        "single_core_trace_s": round(single_trace_s, 1),
        "measured": measured,
        "estimate_per_instance": estimates,
        "estimate_note": "cost model ESTIMATE (roofline compute + published NeuronLink/collective figures)",
        "plan_summary": plan.summary,
    }


def render(results: dict[str, Any], degrees: list[int]) -> str:
    model = results["model"]
    lines = [
        f"BERT QA, {model['layers']} layers, hidden {model['hidden']}, {model['heads']} heads (random weights); "
        f"batch {results['batch']}, sequence {results['sequence']}; {results['compiler_args']}",
        f"MEASURED on this machine ({results['machine']['cpu_count']} CPU cores, one worker process and one intra-op "
        f"thread per rank, median of {results['requests']} interleaved requests):",
        f"  single-core neuron_emu.trace in this process: {results['single_core_in_process_ms']:.3f} ms "
        f"(max |diff| vs the fp32 CPU model {results['single_core_max_abs_diff_vs_cpu_fp32']:.2e})",
        f"  {'tp_degree':>9} {'per request':>12} {'rank0 compute':>14} {'rank0 all-reduce':>17} "
        f"{'max|diff| vs 1 core':>20} {'vs fp32 CPU':>12}",
    ]
    for row in results["measured"]:
        lines.append(
            f"  {row['tp_degree']:>9} {row['per_request_ms']:>9.3f} ms {row['rank0_compute_ms']:>11.3f} ms "
            f"{row['rank0_all_reduce_ms']:>14.3f} ms {row['max_abs_diff_vs_single_core']:>20.2e} "
            f"{row['max_abs_diff_vs_cpu_fp32']:>12.2e}"
        )
    lines.append("ESTIMATED per request by the cost model (roofline + published link figures; not a measurement):")
    header = "".join(f"{f'tp={d}':>12}" for d in degrees)
    lines.append(f"  {'instance':<18}{header}  fastest degree")
    for row in results["estimate_per_instance"]:
        cells = "".join(
            f"{row[f'tp{d}_ms']:>9.4f} ms" if row[f"tp{d}_ms"] is not None else f"{'n/a':>12}" for d in degrees
        )
        lines.append(f"  {row['instance_type']:<18}{cells}  {row['fastest_degree']}")
    lines += [f"  {line}" for line in results["plan_summary"][:2]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--degrees", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--intermediate", type=int, default=3072)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compiler-args", default=DEFAULT_ARGS)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON path")
    args = parser.parse_args(argv)
    args.degrees = sorted(set(args.degrees))
    results = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(f".{args.out.name}.tmp-{os.getpid()}")
    partial.write_text(json.dumps(results, indent=2) + "\n")
    os.replace(partial, args.out)
    print(render(results, args.degrees))
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
