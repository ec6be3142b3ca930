"""`sagebox compile`: a Neuron (Inferentia2/Trainium) model directory from a Hugging Face QA folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from sagebox.cli.common import console


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile for NeuronCores (neuron_emu): one graph per sequence bucket")
    p.add_argument("--model", type=Path, required=True, help="Hugging Face model folder (config, weights, tokenizer)")
    p.add_argument("--out", type=Path, required=True, help="model directory to write")
    p.add_argument("--batch-size", type=int, default=1, help="traced batch size (dynamic batching splits/pads)")
    p.add_argument(
        "--compiler-args",
        help="neuronx-cc style flags (default: --auto-cast matmult --auto-cast-type bf16)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from neuron_emu.qa import instance_estimate, read_plans
    from sagebox.errors import SageboxError
    from sagebox.pipeline.compile import build_neuron

    if args.batch_size < 1:
        raise SageboxError("--batch-size must be at least 1")
    manifest = build_neuron(args.model, args.out, batch_size=args.batch_size, compiler_args=args.compiler_args)
    out = console()
    out.print(
        f"wrote {args.out}: {manifest.runtime} model, buckets {manifest.sequence_buckets}, "
        f"{manifest.compile.auto_cast if manifest.compile else '?'} auto-cast"
    )
    for bucket, plan in sorted(read_plans(args.out).items()):
        inf2 = instance_estimate(plan, "ml.inf2.xlarge")
        if inf2:
            out.print(
                f"  seq {bucket:>4}: estimated {inf2.latency_ms:.3f} ms per inference on one NeuronCore-v2 "
                "(roofline estimate, see neuron_cost_plan.json)"
            )
    return 0
