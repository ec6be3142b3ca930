"""Benchmark reports: the comparison table (terminal and Markdown), results JSON, and a latency CDF plot."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (row key, header, format)
    ("endpoint", "endpoint", "{}"),
    ("task", "task", "{}"),
    ("instance_type", "instance", "{}"),
    ("variant", "variant", "{}"),
    ("p50_ms", "P50 ms", "{:.1f}"),
    ("p90_ms", "P90 ms", "{:.1f}"),
    ("p99_ms", "P99 ms", "{:.1f}"),
    ("qps", "QPS", "{:.1f}"),
    ("usd_per_hour", "$/hour", "{:.3f}"),
    ("usd_per_million", "$/1M queries", "{:.2f}"),
    ("relative_cost", "relative $/perf", "{:.2f}"),
    ("em", "EM", "{:.1f}"),
    ("f1", "F1", "{:.1f}"),
    # Shown only when a row has them: scores on a second, accuracy-only question set (the hand-written held-out set).
    ("heldout_em", "held-out EM", "{:.1f}"),
    ("heldout_f1", "held-out F1", "{:.1f}"),
    # Other tasks' scores (sagebox/bench/workloads.py).
    ("accuracy", "accuracy", "{:.1f}"),
    ("macro_f1", "macro-F1", "{:.1f}"),
    ("entity_f1", "entity F1", "{:.1f}"),
    ("recall_at_10", "recall@10", "{:.1f}"),
)
OPTIONAL = frozenset({"heldout_em", "heldout_f1", "accuracy", "macro_f1", "entity_f1", "recall_at_10"})


def columns(rows: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """Every column some row fills; the task column only when the rows are of more than one task, and the QA
    columns only when a row is question answering."""
    tasks = {row.get("task", "question-answering") for row in rows}
    qa = "question-answering" in tasks

    def shown(key: str) -> bool:
        if key == "task":
            return len(tasks) > 1
        if key in ("em", "f1"):
            return qa
        return key not in OPTIONAL or any(row.get(key) is not None for row in rows)

    return tuple(c for c in COLUMNS if shown(c[0]))


def cell(row: Mapping[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    return "-" if value is None else fmt.format(value)


def rich_table(rows: Sequence[Mapping[str, Any]], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    shown = columns(rows)
    for key, header, _ in shown:
        table.add_column(header, justify="left" if key in ("endpoint", "instance_type", "variant") else "right")
    for row in rows:
        table.add_row(*(cell(row, key, fmt) for key, _, fmt in shown))
    return table


def markdown(rows: Sequence[Mapping[str, Any]], meta: Mapping[str, Any], notes: Sequence[str]) -> str:
    lines = [f"# Sagebox benchmark — {meta.get('started', '')}", ""]
    lines.append(
        f"{meta.get('queries')} requests per endpoint, concurrency {meta.get('concurrency')}"
        + (f", fixed arrival rate {meta['rate_qps']} QPS" if meta.get("rate_qps") else ", closed loop")
        + f"; prices: {meta.get('prices_source')} ({meta.get('prices_region')}, as of {meta.get('prices_as_of')})."
    )
    shown = columns(rows)
    lines += ["", "| " + " | ".join(h for _, h, _ in shown) + " |", "|" + "---|" * len(shown)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row, key, fmt) for key, _, fmt in shown) + " |")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    lines += ["", "![latency CDF](latency_cdf.png)", ""]
    return "\n".join(lines)


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    write_atomic(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())


def write_cdf_png(path: Path, latencies_ms: Mapping[str, Sequence[float]], title: str) -> None:
    """Empirical CDF of each endpoint's latencies (log x axis), one line per endpoint."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for label, values in latencies_ms.items():
        if not values:
            continue
        ordered = sorted(values)
        fraction = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, fraction, where="post", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.0)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)
