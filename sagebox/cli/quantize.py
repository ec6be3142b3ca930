"""`sagebox quantize`: FP32 + INT8 artifacts from a Hugging Face model (any task), gated on its task's accuracy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sagebox.cli.common import console, default_threads, err_console
from sagebox.cli.model_options import EXIT_GATE_FAILED

__all__ = ["EXIT_GATE_FAILED", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:
    from sagebox.cli.model_options import add_gate_options, add_model_options, add_openvino_option
    from sagebox.pipeline.quantize.options import (
        BACKENDS,
        DEFAULT_BACKEND,
        DEFAULT_CALIBRATION_BATCHES,
        DEFAULT_MODE,
        MODES,
    )

    p = sub.add_parser(
        "quantize",
        help="export FP32, quantize INT8, evaluate both, fail if INT8 loses too much accuracy",
        description="Writes OUT/fp32, OUT/int8 and OUT/quantize-report.json. Exits 3 (and deletes OUT/int8) "
        "when INT8 falls more than --max-drop points below FP32 on the task's metrics (or, for embeddings, under "
        "--min-cosine).",
    )
    add_model_options(p)
    p.add_argument("--out", type=Path, required=True, help="output directory (replaced atomically)")
    add_gate_options(p)
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND)
    p.add_argument("--mode", choices=MODES, default=DEFAULT_MODE)
    p.add_argument("--batches", type=int, default=DEFAULT_CALIBRATION_BATCHES, help="calibration batches (static)")
    p.add_argument("--calibration-batch-size", type=int, default=1)
    p.add_argument(
        "--calibration-method",
        default="auto",
        help="static only: auto (percentile for onnxruntime, histogram for torch), minmax, percentile, "
        "entropy (onnxruntime), histogram (torch)",
    )
    p.add_argument("--per-tensor", action="store_true", help="one weight scale per tensor instead of per channel")
    p.add_argument("--reduce-range", action="store_true", help="7-bit weights (helps CPUs without VNNI)")
    p.add_argument("--no-fuse", action="store_true", help="skip ONNX Runtime's transformer fusions on the ONNX graph")
    p.add_argument("--threads", type=int, default=None, help="inference threads for evaluation (default: all CPUs)")
    p.add_argument(
        "--no-fallback",
        action="store_true",
        help="fail at once when INT8 trips the gate (default: retry with 7-bit weights, then FP32 attention)",
    )
    add_openvino_option(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sagebox.cli.tables import quantize_table
    from sagebox.pipeline.export.servable import ModelSource
    from sagebox.pipeline.quantize.options import QuantizeOptions, alternatives_for, fallbacks
    from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize

    options = QuantizeOptions(
        backend=args.backend,
        mode=args.mode,
        per_channel=not args.per_tensor,
        reduce_range=args.reduce_range,
        calibration_batches=args.batches,
        calibration_batch_size=args.calibration_batch_size,
        calibration_method=args.calibration_method,
    )
    say = lambda line: err_console().print(f"[dim]{line}[/dim]")  # noqa: E731
    source = ModelSource.resolve(args.model, say)
    request = QuantizeRequest(
        model=source.folder,
        out=args.out,
        eval_data=args.eval,
        options=options,
        calibration_data=args.calibration,
        max_f1_drop=args.max_drop,
        min_cosine=args.min_cosine,
        task=args.task,
        source=source,
        threads=args.threads or default_threads(),
        fuse=not args.no_fuse,
        fallbacks=() if args.no_fallback else fallbacks(options),
        alternatives=() if args.no_openvino else alternatives_for(options),
    )
    outcome = run_quantize(request, say=say)
    if args.json:
        print(json.dumps(outcome.report(), indent=2, sort_keys=True))
    else:
        console().print(quantize_table(outcome))
    if not outcome.gate.passed:
        print(f"sagebox: error: {outcome.gate.message()}; INT8 artifact deleted", file=sys.stderr)
        return EXIT_GATE_FAILED
    return 0
