"""`sagebox compile`: a Neuron (Inferentia2/Trainium) model directory from a Hugging Face model (any encoder task), or
from a text-generation model directory (`--model-dir`, what `sagebox build --task text-generation` wrote)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sagebox.cli.common import console

if TYPE_CHECKING:
    from sagebox.pipeline.compile.neuron import Backend

# CLI spelling -> the manifest's compile.backend.
BACKEND_CHOICES: dict[str, Backend] = {"neuron-emu": "neuron_emu", "torch-neuronx": "torch_neuronx"}
AUTO_CAST_CHOICES = ("none", "matmult")
TARGET_CHOICES = ("inf2", "trn1")
TEXT_GENERATION_FROM_MODEL = (
    "{model} is a text-generation model: build it first (sagebox build --task text-generation --model {model}), then "
    "compile the FP32 directory that writes: sagebox compile --model-dir <work>/fp32 --out DIR"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="compile for NeuronCores: one graph per sequence bucket")
    from sagebox.cli.model_options import add_model_options

    add_model_options(p, required=False)
    p.add_argument(
        "--model-dir",
        type=Path,
        help="instead of --model: a text-generation model directory (`sagebox build --task text-generation` writes "
        "<work>/fp32), compiled as NxD Inference compiles a decoder (context encoding and token generation per "
        "sequence bucket, batch lines fixed at compile)",
    )
    p.add_argument("--out", type=Path, required=True, help="model directory to write")
    p.add_argument(
        "--batch-size",
        type=int,
        default=1,
        help="traced batch size (encoders: dynamic batching splits/pads; a decoder: the sequences it runs at once, "
        "fixed at compile)",
    )
    p.add_argument(
        "--compiler-args",
        help="neuronx-cc flags (default: --auto-cast matmult --auto-cast-type bf16); or --auto-cast and --target",
    )
    p.add_argument(
        "--auto-cast",
        choices=AUTO_CAST_CHOICES,
        help="matmult (default): matrix multiplications in bf16, as neuronx-cc casts them; none: FP32 throughout",
    )
    p.add_argument("--target", choices=TARGET_CHOICES, help="the instance family to compile for (inf2 or trn1)")
    p.add_argument(
        "--max-length",
        type=int,
        help="text generation: prompt plus generated tokens of one sequence, fixed at compile (default: the model's "
        "context, at most 2048)",
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


def compiler_args(args: argparse.Namespace) -> str | None:
    """--compiler-args as given, or the flags --auto-cast and --target stand for (None: the defaults)."""
    from sagebox.errors import SageboxError

    if args.compiler_args is not None and (args.auto_cast or args.target):
        raise SageboxError("give --compiler-args, or --auto-cast and --target, not both")
    if args.compiler_args is not None or not (args.auto_cast or args.target):
        return str(args.compiler_args) if args.compiler_args is not None else None
    parts = [f"--auto-cast {args.auto_cast or 'matmult'}"]
    if (args.auto_cast or "matmult") != "none":
        parts.append("--auto-cast-type bf16")
    if args.target:
        parts.append(f"--target {args.target}")
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    from sagebox.errors import SageboxError

    if args.batch_size < 1:
        raise SageboxError("--batch-size must be at least 1")
    if args.tensor_parallel < 1:
        raise SageboxError("--tensor-parallel must be at least 1")
    if (args.model is None) == (args.model_dir is None):
        raise SageboxError("give --model (a Hugging Face encoder) or --model-dir (a text-generation model directory)")
    if args.model_dir is not None:
        return run_generation(args)
    if args.max_length is not None:
        raise SageboxError("--max-length is for a text-generation model (--model-dir)")
    return run_encoder(args)


def run_generation(args: argparse.Namespace) -> int:
    from neuron_emu.compiler_args import parse_compiler_args
    from neuron_emu.errors import NeuronEmuError
    from sagebox.errors import SageboxError
    from sagebox.pipeline.compile.generation import DecoderCompile, compile_generation

    if args.task not in (None, "text-generation"):
        raise SageboxError(f"--model-dir compiles a text-generation model, not {args.task}")
    if args.max_length is not None and args.max_length < 2:
        raise SageboxError("--max-length must be at least 2")
    try:
        options = parse_compiler_args(compiler_args(args))
    except NeuronEmuError as exc:
        raise SageboxError(f"--compiler-args: {exc}") from None
    out = console()
    manifest, _ = compile_generation(
        args.model_dir,
        args.out,
        DecoderCompile(
            tensor_parallel=args.tensor_parallel,
            batch_size=args.batch_size,
            max_length=args.max_length,
            auto_cast=options.auto_cast,
            auto_cast_type=options.auto_cast_type,
            target=options.target,
        ),
        backend=BACKEND_CHOICES[args.backend],
        say=lambda line: out.print(f"[dim]{line}[/]"),
    )
    compiled = manifest.compile
    assert compiled is not None
    cast = "none (FP32)" if compiled.auto_cast == "none" else f"{compiled.auto_cast} ({compiled.auto_cast_type})"
    out.print(
        f"wrote {args.out}: text-generation neuron model ({args.backend}), tensor parallel "
        f"{compiled.tensor_parallel}, batch {compiled.batch_size}, max length {manifest.tokenizer.max_length}, "
        f"buckets {manifest.sequence_buckets}, auto-cast {cast}"
    )
    out.print(
        f"  emulated: these graphs run on the host CPU (on an inf2/trn1 endpoint only with allow_emulated); a target "
        f"serves it with tensor_parallel: {compiled.tensor_parallel}, and its environment must not ask for other shapes"
    )
    return 0


def run_encoder(args: argparse.Namespace) -> int:
    from neuron_emu.qa import instance_estimate, read_plans
    from sagebox.errors import SageboxError
    from sagebox.pipeline.compile.neuron import PARALLEL_PLAN_TEXT, build_neuron, read_parallel_plans
    from sagebox.pipeline.export.servable import ModelSource
    from sagebox.pipeline.load.hf_task import detect_task

    backend = BACKEND_CHOICES[args.backend]
    source = ModelSource.resolve(args.model, lambda line: console().print(f"[dim]{line}[/]"))
    info = detect_task(source.folder, args.task)
    if info.task == "text-generation":
        raise SageboxError(TEXT_GENERATION_FROM_MODEL.format(model=args.model))
    manifest = build_neuron(
        source.folder,
        args.out,
        info=info,
        source=source,
        batch_size=args.batch_size,
        compiler_args=compiler_args(args),
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
