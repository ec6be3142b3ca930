"""Readable tables (rich) for quantize / evaluate results."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from sagebox.pipeline.gate.evaluate import Evaluation
from sagebox.pipeline.quantize_flow import QuantizeOutcome


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def quantize_table(outcome: QuantizeOutcome) -> Table:
    if not isinstance(outcome.fp32, Evaluation):
        return _task_quantize_table(outcome)
    q = outcome.int8_manifest.quantization
    title = "sagebox quantize"
    if q is not None:
        title += f": {q.backend} {q.mode}, per-channel={q.per_channel}, calib={q.calibration_batches}"
    table = Table(title=title)
    table.add_column("variant")
    table.add_column("runtime")
    for column in ("EM", "F1", "questions", "size", "eval"):
        table.add_column(column, justify="right")
    for name, evaluation in (("fp32", outcome.fp32), ("int8", outcome.int8)):
        table.add_row(
            name.upper(),
            evaluation.runtime,
            f"{evaluation.score.exact_match:.2f}",
            f"{evaluation.score.f1:.2f}",
            str(evaluation.score.total),
            _mb(outcome.sizes[name]),
            f"{evaluation.seconds:.1f} s",
        )
    ratio = outcome.sizes["int8"] / outcome.sizes["fp32"]
    colour = "green" if outcome.gate.passed else "red"
    int8_dir = outcome.int8_dir or "deleted (gate failed)"
    table.caption = (
        f"[{colour}]{outcome.gate.message()}[/{colour}]\nINT8/FP32 size {ratio:.2f}; "
        f"FP32: {outcome.out / 'fp32'}; INT8: {int8_dir}"
    )
    if q is not None and q.mode == "static":
        table.caption += f"\ncalibration: {outcome.calibration_note}"
    return table


def evaluation_table(evaluation: Evaluation) -> Table:
    table = Table(title=f"sagebox evaluate: {evaluation.model_dir}")
    for column in ("variant", "runtime", "EM", "F1", "questions", "unanswered", "time"):
        table.add_column(column)
    table.add_row(
        evaluation.variant,
        evaluation.runtime,
        f"{evaluation.score.exact_match:.2f}",
        f"{evaluation.score.f1:.2f}",
        str(evaluation.score.total),
        str(evaluation.score.unanswered),
        f"{evaluation.seconds:.1f} s",
    )
    return table


def _task_quantize_table(outcome: QuantizeOutcome) -> Table:
    """Any task's evaluations: its metrics (none without labelled data), size and evaluation time."""
    q = outcome.int8_manifest.quantization
    title = f"sagebox quantize ({outcome.task})"
    if q is not None:
        title += f": {q.backend} {q.mode}, per-channel={q.per_channel}"
    table = Table(title=title)
    names = list(outcome.fp32.metrics)
    for column in ("variant", "runtime", *names, "examples", "size", "eval"):
        table.add_column(column, justify="left" if column in ("variant", "runtime") else "right")
    for name, evaluation in (("fp32", outcome.fp32), ("int8", outcome.int8)):
        table.add_row(
            name.upper(),
            evaluation.runtime,
            *(f"{evaluation.metrics[m]:.2f}" for m in names),
            str(evaluation.count),
            _mb(outcome.sizes[name]),
            f"{evaluation.seconds:.1f} s",
        )
    colour = "green" if outcome.gate.passed else "red"
    ratio = outcome.sizes["int8"] / outcome.sizes["fp32"]
    int8_dir = outcome.int8_dir or "deleted (gate failed)"
    table.caption = (
        f"[{colour}]{outcome.gate.message()}[/{colour}]\nINT8/FP32 size {ratio:.2f}; "
        f"FP32: {outcome.out / 'fp32'}; INT8: {int8_dir}\ngate data: {outcome.gate.data}"
    )
    return table


def task_evaluation_table(evaluation: Any) -> Table:
    table = Table(title=f"sagebox evaluate: {evaluation.model_dir}")
    names = list(evaluation.metrics)
    for column in ("variant", "runtime", *names, "examples", "time"):
        table.add_column(column)
    table.add_row(
        evaluation.variant,
        evaluation.runtime,
        *(f"{evaluation.metrics[m]:.2f}" for m in names),
        str(evaluation.count),
        f"{evaluation.seconds:.1f} s",
    )
    return table


def generation_gate_table(gate: Any, where: str) -> Table:
    """A text-generation build's two variants side by side: perplexity, its ratio, and INT8's greedy agreement."""
    m = gate.measures
    a = m.agreement
    table = Table(title=f"sagebox evaluate: {where}", caption=gate.message())
    for column in ("variant", "perplexity", "ratio", "greedy agreement", "prompts equal", "first difference"):
        table.add_column(column)
    table.add_row("fp32", f"{m.fp32.perplexity:.3f}", "1", "", "", "")
    table.add_row(
        "int8",
        f"{m.int8.perplexity:.3f}",
        f"{m.perplexity_ratio:.4f}",
        f"{a.share:.3f} of {a.positions}",
        f"{a.prompts_equal} of {a.prompts}",
        f"token {a.mean_first_divergence:.1f} (mean)",
    )
    return table
