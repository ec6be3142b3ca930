"""`sagebox compile`: a Neuron (Inferentia2/Trainium) model directory from a Hugging Face model (any task)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sagebox.cli.common import console

if TYPE_CHECKING:
    from sagebox.pipeline.compile.neuron import Backend

# CLI spelling -> the manifest's compile.backend.
BACKEND_CHOICES: dict[str, Backend] = {"neuron-emu": "neuron_emu", "torch-neuronx": "torch_neuronx"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile for NeuronCores: one graph per sequence bucket")
    from sagebox.cli.model_options import add_model_options

    add_model_options(p)
    p.add_argument("--out", type=Path, required=True, help="model directory to write")
    p.add_argument("--batch-size", type=int, default=1, help="traced batch size (dynamic batching splits/pads)")
    p.add_argument(
        "--compiler-args",
        help="neuronx-cc flags (default: --auto-cast matmult --auto-cast-type bf16)",
    )
    p.add_argument(
        "--backend",
        choices=sorted(BACKEND_CHOICES),
        default="neuron-emu",
        help="neuron-emu (default): Sagebox's emulator, graphs that run on the host CPU (the local box; on a real "
        "inf2/trn1 endpoint that is CPU inference); torch-neuronx: AWS's compiler, graphs for real NeuronCores "
        "(run it on an inf2/trn1 instance or in the AWS Neuron PyTorch container)",
    )
    p.add_argument(
        "--tensor-parallel",
        type=int,
        default=1,
        metavar="N",
        help="shard the model over N NeuronCores (Megatron-style tensor parallelism; neuron-emu only): N must "
        "divide the attention heads and fit the largest target instance's cores (default 1: one core)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from neuron_emu.qa import instance_estimate, read_plans
    from sagebox.errors import SageboxError
    from sagebox.pipeline.compile.neuron import PARALLEL_PLAN_TEXT, build_neuron, read_parallel_plans

    if args.batch_size < 1:
        raise SageboxError("--batch-size must be at least 1")
    if args.tensor_parallel < 1:
        raise SageboxError("--tensor-parallel must be at least 1")
    from sagebox.pipeline.export.servable import ModelSource
    from sagebox.pipeline.load.hf_task import detect_task

    backend = BACKEND_CHOICES[args.backend]
    source = ModelSource.resolve(args.model, lambda line: console().print(f"[dim]{line}[/]"))
    manifest = build_neuron(
        source.folder,
        args.out,
        info=detect_task(source.folder, args.task),
        source=source,
        batch_size=args.batch_size,
        compiler_args=args.compiler_args,
        backend=backend,
        tensor_parallel=args.tensor_parallel,
    )
    out = console()
    out.print(
        f"wrote {args.out}: {manifest.task} {manifest.runtime} model ({args.backend}), "
        f"buckets {manifest.sequence_buckets}, "
        f"{manifest.compile.auto_cast if manifest.compile else '?'} auto-cast"
    )
    if backend != "neuron_emu":
        out.print("  runs on NeuronCores only: deploy it to an inf2/trn1 target (the Neuron image)")
        return 0
    out.print("  emulated: these graphs run on the host CPU (on an inf2/trn1 endpoint only with allow_emulated)")
    if args.tensor_parallel > 1:
        out.print(
            f"  tensor parallel {args.tensor_parallel}: one worker process per core and bucket when served; "
            f"a target must set tensor_parallel: {args.tensor_parallel}"
        )
        for bucket, plan in sorted(read_parallel_plans(args.out).items()):
            # The first (smallest) instance type with enough cores for the degree.
            row = next((i for i in plan.instances if i.at(args.tensor_parallel) is not None), None)
            cost = row.at(args.tensor_parallel) if row is not None else None
            if row is None or cost is None:
                continue
            out.print(
                f"  seq {bucket:>4}: estimated {cost.latency_us / 1000:.3f} ms per inference on {row.instance_type} "
                f"({cost.collective_us:.1f} us collectives); fastest degree there: {row.fastest_degree}"
            )
        out.print(f"  (roofline estimates, not measurements: see {PARALLEL_PLAN_TEXT})")
        return 0
    for bucket, plan in sorted(read_plans(args.out).items()):
        inf2 = instance_estimate(plan, "ml.inf2.xlarge")
        if inf2:
            out.print(
                f"  seq {bucket:>4}: estimated {inf2.latency_ms:.3f} ms per inference on one NeuronCore-v2 "
                "(roofline estimate, see neuron_cost_plan.json)"
            )
    return 0
