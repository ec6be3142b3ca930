"""`sagebox build`: FP32, INT8 (accuracy-gated) and Neuron artifacts from one model (a folder or a Hub id, any
task), packaged for CDK."""

from __future__ import annotations

import argparse
from pathlib import Path

from sagebox.cli.common import console, default_threads

TASK_HELP = (
    "question-answering, text-classification, token-classification or feature-extraction (default: what the "
    "folder's architecture or sentence-transformers files say)"
)
EVAL_HELP = (
    "labelled data for the INT8 accuracy gate: SQuAD v1.1 JSON (question-answering); JSON Lines or CSV of text,label "
    "(text-classification; text_pair for pairs); JSON Lines of text + entities or tokens + tags "
    "(token-classification); JSON Lines of query + positive passage (feature-extraction). Without it the gate "
    "compares INT8 with FP32 on the calibration text and says no labelled accuracy was measured"
)


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        required=True,
        help="a Hugging Face model folder, or a Hub id org/name[@revision] (downloaded with huggingface_hub: "
        "HF_HOME, HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE apply)",
    )
    p.add_argument("--task", help=TASK_HELP)


def add_gate_options(p: argparse.ArgumentParser) -> None:
    from sagebox.pipeline.task_gate import DEFAULT_MAX_DROP, DEFAULT_MIN_COSINE

    p.add_argument("--eval", type=Path, help=EVAL_HELP)
    p.add_argument(
        "--calibration",
        type=Path,
        help="calibration inputs (static quantization; and the gate's comparison text without --eval): SQuAD JSON "
        "for question answering, else text (.txt lines, JSON Lines or CSV with a text column)",
    )
    p.add_argument(
        "--max-drop",
        "--max-f1-drop",
        dest="max_drop",
        type=float,
        default=DEFAULT_MAX_DROP,
        help=f"allowed INT8 loss in points of the task's metrics (F1, accuracy, macro-F1, recall@10; default "
        f"{DEFAULT_MAX_DROP})",
    )
    p.add_argument(
        "--min-cosine",
        type=float,
        default=DEFAULT_MIN_COSINE,
        help=f"feature-extraction: least mean cosine between INT8 and FP32 embeddings (default {DEFAULT_MIN_COSINE})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "build",
        help="quantize, compile and package a model into <out>/{fp32,int8,neuron}/model.tar.gz",
    )
    add_model_options(p)
    add_gate_options(p)
    p.add_argument("--work", type=Path, default=Path("build/work"), help="model directories (default build/work)")
    p.add_argument(
        "--out", type=Path, default=Path("build/models"), help="packages, where `cdk synth` looks (build/models)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.pipeline.accuracy_gate import GateFailed
    from sagebox.pipeline.build_all import build_all
    from sagebox.pipeline.servable import ModelSource

    out = console()

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
        )
    except GateFailed as exc:
        import sys

        from sagebox.cli.quantize import EXIT_GATE_FAILED

        print(f"sagebox: error: {exc}; INT8 artifact deleted", file=sys.stderr)
        return EXIT_GATE_FAILED
    where = artifacts.source
    if where is not None:
        pinned = f" @ {where.revision}" if where.revision else ""
        out.print(f"{artifacts.task} model {where.name}{pinned} ({where.architecture}, license {where.license})")
    for variant, tarball in artifacts.tarballs.items():
        out.print(f"{variant:>6}: {tarball} ({tarball.stat().st_size / 1e6:.1f} MB)")
    out.print("next: `npx cdk deploy --all` (after `npx cdk bootstrap`), or try them locally with `sagebox up`")
    return 0
