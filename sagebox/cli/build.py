"""`sagebox build`: FP32, INT8 (accuracy-gated) and Neuron artifacts from one model (a folder or a Hub id, any
task), packaged for CDK; a decoder LLM (text-generation, also from a GGUF file): its FP32 and INT8 artifacts, INT8
gated on its perplexity ratio and greedy agreement with FP32."""

from __future__ import annotations

import argparse
from pathlib import Path

from sagebox.cli.common import console, default_threads
from sagebox.cli.model_options import (
    EXIT_GATE_FAILED,
    add_gate_options,
    add_generation_gate_options,
    add_model_options,
    add_openvino_option,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="quantize, compile and package a model into <out>/{fp32,int8,neuron}/model.tar.gz (text-generation: "
        "<out>/{fp32,int8}, INT8 gated on perplexity and greedy agreement)",
    )
    add_model_options(p)
    add_gate_options(p)
    add_generation_gate_options(p)
    p.add_argument("--work", type=Path, default=Path("build/work"), help="model directories (default build/work)")
    p.add_argument(
        "--out", type=Path, default=Path("build/models"), help="packages, where `cdk synth` looks (build/models)"
    )
    add_openvino_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.pipeline.build_all import build_all
    from sagebox.pipeline.export.servable import ModelSource
    from sagebox.pipeline.gate.accuracy_gate import GateFailed
    from sagebox.pipeline.gate.generation_limits import GenerationLimits

    out = console()
    limits = GenerationLimits(args.max_perplexity_ratio, args.min_agreement)  # checked before any work

    def say(line: str) -> None:
        out.print(f"[dim]{line}[/]")

    try:
        source = ModelSource.resolve(args.model, say)
        artifacts = build_all(
            source.folder,
            args.eval,
            args.work,
            args.out,
            calibration_data=args.calibration,
            threads=default_threads(),
            say=say,
            task=args.task,
            max_drop=args.max_drop,
            min_cosine=args.min_cosine,
            source=source,
            generation_limits=limits,
            openvino=not args.no_openvino,
        )
    except GateFailed as exc:
        import sys

        print(f"sagebox: error: {exc}; INT8 artifact deleted", file=sys.stderr)
        return EXIT_GATE_FAILED
    where = artifacts.source
    if where is not None:
        pinned = f" @ {where.revision}" if where.revision else ""
        out.print(f"{artifacts.task} model {where.name}{pinned} ({where.architecture}, license {where.license})")
    perplexity = artifacts.quantize_report.get("perplexity")
    if isinstance(perplexity, dict):
        out.print(
            f"perplexity {perplexity['perplexity']:.3f} on {perplexity['data']} ({perplexity['tokens']} tokens, "
            f"windows of {perplexity['context']} every {perplexity['stride']})"
        )
    gate = artifacts.quantize_report.get("gate")
    if artifacts.task == "text-generation" and isinstance(gate, dict):
        out.print(str(gate["message"]))
    for variant, tarball in artifacts.tarballs.items():
        out.print(f"{variant:>6}: {tarball} ({tarball.stat().st_size / 1e6:.1f} MB)")
    out.print("next: `npx cdk deploy --all` (after `npx cdk bootstrap`), or try them locally with `sagebox up`")
    return 0
