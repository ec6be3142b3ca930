"""`sagebox build`: FP32, INT8 (accuracy-gated) and Neuron artifacts from one model folder, packaged for CDK."""

from __future__ import annotations

import argparse
from pathlib import Path

from sagebox.cli.common import console, default_threads


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="quantize, compile and package a HF QA folder into <out>/{fp32,int8,neuron}/model.tar.gz",
    )
    p.add_argument("--model", type=Path, required=True, help="Hugging Face model folder (config, weights, tokenizer)")
    p.add_argument("--eval", type=Path, required=True, help="SQuAD v1.1 JSON for the INT8 accuracy gate")
    p.add_argument("--calibration", type=Path, help="SQuAD v1.1 JSON for calibration (default: --eval)")
    p.add_argument("--work", type=Path, default=Path("build/work"), help="model directories (default build/work)")
    p.add_argument(
        "--out", type=Path, default=Path("build/models"), help="packages, where `cdk synth` looks (build/models)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.pipeline.accuracy_gate import GateFailed
    from sagebox.pipeline.build_all import build_all

    out = console()
    try:
        artifacts = build_all(
            args.model,
            args.eval,
            args.work,
            args.out,
            calibration_data=args.calibration,
            threads=default_threads(),
            say=lambda line: out.print(f"[dim]{line}[/]"),
        )
    except GateFailed as exc:
        import sys

        from sagebox.cli.quantize import EXIT_GATE_FAILED

        print(f"sagebox: error: {exc}; INT8 artifact deleted", file=sys.stderr)
        return EXIT_GATE_FAILED
    for variant, tarball in artifacts.tarballs.items():
        out.print(f"{variant:>6}: {tarball} ({tarball.stat().st_size / 1e6:.1f} MB)")
    out.print("next: `npx cdk deploy --all` (after `npx cdk bootstrap`), or try them locally with `sagebox up`")
    return 0
