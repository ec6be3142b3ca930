"""`sagebox evaluate`: a model directory's accuracy on labelled data of its task, through the serving predictor (a
text-generation model: its perplexity, through the serving engine; a text-generation build's work folder: both
variants' perplexity, their ratio and INT8's greedy agreement with FP32)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sagebox.cli.common import console, default_threads


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate", help="accuracy of a model directory on its task's labelled data (the code path the server runs)"
    )
    p.add_argument(
        "--model-dir",
        type=Path,
        required=True,
        help="directory holding manifest.json, or a text-generation build's work folder (holding fp32/ and int8/)",
    )
    p.add_argument(
        "--data",
        type=Path,
        help="labelled data: SQuAD v1.1 JSON (question-answering), JSON Lines/CSV text,label (text-classification), "
        "JSON Lines text+entities (token-classification), JSON Lines query+positive (feature-extraction); texts for "
        "text-generation's perplexity (.txt lines, JSON Lines or CSV; default: Sagebox's built-in held-out text)",
    )
    p.add_argument("--threads", type=int, default=None, help="inference threads (default: all CPUs)")
    p.add_argument("--predictions", type=Path, help="also write {question id: answer} JSON here")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.cli.tables import evaluation_table, generation_gate_table, task_evaluation_table
    from sagebox.pipeline.gate.evaluate import Evaluation
    from sagebox.pipeline.gate.generation_gate import GenerationGate
    from sagebox.pipeline.quantize_flow import evaluate_only

    evaluation = evaluate_only(args.model_dir, args.data, args.threads or default_threads())
    if isinstance(evaluation, GenerationGate):
        if args.json:
            print(json.dumps(evaluation.summary(), indent=2, sort_keys=True))
        else:
            console().print(generation_gate_table(evaluation, str(args.model_dir)))
        return 0
    if not isinstance(evaluation, Evaluation):
        if args.json:
            print(json.dumps(evaluation.summary(), indent=2, sort_keys=True))
        else:
            console().print(task_evaluation_table(evaluation))
        return 0
    if args.predictions:
        args.predictions.write_text(json.dumps(evaluation.predictions, indent=1, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(evaluation.summary(), indent=2, sort_keys=True))
    else:
        console().print(evaluation_table(evaluation))
    return 0
