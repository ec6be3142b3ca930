"""The options `build`, `quantize` and `compile` share: which model (a folder or a Hub id) and task, and the INT8
gate's data and limits (text-generation's own limits: `build` only); the exit status of a gate that refused INT8."""

from __future__ import annotations

import argparse
from pathlib import Path

# `quantize` and `build` exit with this when INT8 fails its accuracy gate (and its directory was deleted).
EXIT_GATE_FAILED = 3

TASK_HELP = (
    "question-answering, text-classification, token-classification, feature-extraction or text-generation (a "
    "decoder LLM: llama, mistral, qwen2, gpt2 or opt; `sagebox build` only) (default: what the folder's architecture "
    "or sentence-transformers files say)"
)
EVAL_HELP = (
    "labelled data for the INT8 accuracy gate: SQuAD v1.1 JSON (question-answering); JSON Lines or CSV of text,label "
    "(text-classification; text_pair for pairs); JSON Lines of text + entities or tokens + tags "
    "(token-classification); JSON Lines of query + positive passage (feature-extraction). Without it the gate "
    "compares INT8 with FP32 on the calibration text and says no labelled accuracy was measured"
)


def add_model_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "--model",
        required=required,
        help="a Hugging Face model folder, a Hub id org/name[@revision] (downloaded with huggingface_hub: "
        "HF_HOME, HF_TOKEN, HF_ENDPOINT and HF_HUB_OFFLINE apply), or a decoder LLM's .gguf file (text-generation)",
    )
    p.add_argument("--task", help=TASK_HELP)


def add_gate_options(p: argparse.ArgumentParser) -> None:
    from sagebox.pipeline.gate.task_gate import DEFAULT_MAX_DROP, DEFAULT_MIN_COSINE

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


def add_generation_gate_options(p: argparse.ArgumentParser) -> None:
    """text-generation's INT8 gate (sagebox/pipeline/gate/generation_gate.py)."""
    from sagebox.pipeline.gate.generation_limits import DEFAULT_MAX_PERPLEXITY_RATIO, DEFAULT_MIN_AGREEMENT

    p.add_argument(
        "--max-perplexity-ratio",
        type=float,
        default=DEFAULT_MAX_PERPLEXITY_RATIO,
        help="text-generation: largest INT8/FP32 perplexity ratio on the built-in held-out text (default "
        f"{DEFAULT_MAX_PERPLEXITY_RATIO})",
    )
    p.add_argument(
        "--min-agreement",
        type=float,
        default=DEFAULT_MIN_AGREEMENT,
        help="text-generation: least share of greedy tokens INT8 generates as FP32 does on the built-in chat prompts "
        f"(default {DEFAULT_MIN_AGREEMENT})",
    )


def add_openvino_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-openvino",
        action="store_true",
        help="skip the OpenVINO INT8 build (by default built beside the primary INT8 model, gated alike, and loaded "
        "on the CPU kinds it is faster on: AVX-512 VNNI and AMX; see infra/data/cpu_kinds.json)",
    )
