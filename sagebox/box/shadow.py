"""Shadow variants: what the gateway records of each mirrored request, and the report comparing a shadow with
production.

After AWS's shadow variants ("Shadow variants", https://docs.aws.amazon.com/sagemaker/latest/dg/model-shadow-deployment.html):
a shadow variant gets a copy of (a sampled share of) the requests production serves; callers only ever get
production's answer; its answers and latencies are recorded to compare the two. The box's gateway sends the copy
concurrently with the production call, never delays or fails the production answer for it (a copy that finds the
shadow saturated is dropped and counted), and appends one JSON line per mirrored request to
`<state dir>/shadow/<endpoint>.jsonl`. `report()` compares them: how often the answers agree, EM/F1 of the shadow's
answers scored against production's (SQuAD's metric, sagebox.pipeline.gate.squad_metric), P50/P90 of each side's
latency.

Pure logic and file I/O; `sagebox shadow-report ENDPOINT` (sagebox/cli/shadow.py) writes the report.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagebox.bench.stats import percentile
from sagebox.pipeline.gate.squad_metric import exact_match, f1, normalize_answer

SHADOW_DIR = "shadow"
MAX_ANSWER_CHARS = 2000


@dataclass(frozen=True)
class Side:
    """One side of a mirrored request: which variant answered, its HTTP status, its latency, its answer."""

    variant: str
    status: int  # the container's status (503/504: it could not be reached or did not answer)
    latency_ms: float
    answer: str | None  # the answer text of a QA reply, else the body (truncated); None on an error


@dataclass(frozen=True)
class ShadowRecord:
    at: float  # epoch seconds
    endpoint: str
    production: Side
    shadow: Side | None  # None: the copy was dropped (the shadow was saturated)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> ShadowRecord:
        shadow = raw.get("shadow")
        return cls(
            float(raw["at"]), str(raw["endpoint"]), Side(**raw["production"]), Side(**shadow) if shadow else None
        )


def answer_of(status: int, body: bytes) -> str | None:
    """What is compared: the `answer` of a QA reply (the serving container's JSON), else the body as text."""
    if status >= 400:
        return None
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:MAX_ANSWER_CHARS]
    if isinstance(parsed, dict) and isinstance(parsed.get("answer"), str):
        return str(parsed["answer"])[:MAX_ANSWER_CHARS]
    return json.dumps(parsed, sort_keys=True)[:MAX_ANSWER_CHARS]


def log_path(state_dir: Path, endpoint: str) -> Path:
    return state_dir / SHADOW_DIR / f"{endpoint}.jsonl"


def append(state_dir: Path, records: Sequence[ShadowRecord]) -> None:
    """Append records to their endpoints' logs (one write per endpoint)."""
    by_endpoint: dict[str, list[ShadowRecord]] = {}
    for record in records:
        by_endpoint.setdefault(record.endpoint, []).append(record)
    for endpoint, items in by_endpoint.items():
        path = log_path(state_dir, endpoint)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write("".join(r.to_json() + "\n" for r in items))


def load(state_dir: Path, endpoint: str) -> list[ShadowRecord]:
    """Every record of an endpoint (a torn last line, from a gateway stopped mid-write, is skipped)."""
    path = log_path(state_dir, endpoint)
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(ShadowRecord.of(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return records


def _latencies(sides: Iterable[Side]) -> dict[str, float | None]:
    values = [s.latency_ms for s in sides]
    if not values:
        return {"p50_ms": None, "p90_ms": None}
    return {"p50_ms": percentile(values, 50), "p90_ms": percentile(values, 90)}


def report(records: Sequence[ShadowRecord]) -> dict[str, Any]:
    """Shadow vs production over the mirrored requests: counts, errors, answer agreement (SQuAD-normalized answers
    equal), EM/F1 (percent) of the shadow's answers with production's as the gold answer, latency P50/P90."""
    mirrored = [r for r in records if r.shadow is not None]
    pairs = [
        (r.production.answer, r.shadow.answer)
        for r in mirrored
        if r.shadow is not None and r.production.answer is not None and r.shadow.answer is not None
    ]
    compared = len(pairs)
    agree = sum(1 for gold, said in pairs if normalize_answer(said or "") == normalize_answer(gold or ""))
    em = [exact_match(said or "", gold or "") for gold, said in pairs]
    f1s = [f1(said or "", gold or "") for gold, said in pairs]
    variants = {
        "production": sorted({r.production.variant for r in records}),
        "shadow": sorted({r.shadow.variant for r in mirrored if r.shadow}),
    }
    return {
        "endpoint": records[0].endpoint if records else "",
        "variants": variants,
        "requests": len(records),
        "mirrored": len(mirrored),
        "dropped": len(records) - len(mirrored),
        "compared": compared,
        "production_errors": sum(1 for r in mirrored if r.production.status >= 400),
        "shadow_errors": sum(1 for r in mirrored if r.shadow and r.shadow.status >= 400),
        "agreement": agree / compared if compared else None,
        "exact_match": 100.0 * sum(em) / len(em) if em else None,
        "f1": 100.0 * sum(f1s) / len(f1s) if f1s else None,
        "production_latency": _latencies(r.production for r in mirrored),
        "shadow_latency": _latencies(r.shadow for r in mirrored if r.shadow),
        "first_at": min((r.at for r in records), default=None),
        "last_at": max((r.at for r in records), default=None),
    }


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def markdown(summary: Mapping[str, Any]) -> str:
    variants = summary["variants"]
    production, shadow = summary["production_latency"], summary["shadow_latency"]
    agreement = summary["agreement"]
    lines = [
        f"# Shadow report: {summary['endpoint']}",
        "",
        f"Production {', '.join(variants['production']) or '-'} vs shadow {', '.join(variants['shadow']) or '-'}: "
        f"{summary['requests']} request(s) sampled for a copy (production served others unrecorded), "
        f"{summary['mirrored']} mirrored ({summary['dropped']} copies dropped while the shadow was saturated); "
        f"{summary['compared']} with an answer on both sides.",
        "",
        "| | production | shadow |",
        "|---|---|---|",
        f"| P50 latency (ms) | {_num(production['p50_ms'], '{:.1f}')} | {_num(shadow['p50_ms'], '{:.1f}')} |",
        f"| P90 latency (ms) | {_num(production['p90_ms'], '{:.1f}')} | {_num(shadow['p90_ms'], '{:.1f}')} |",
        f"| errors | {summary['production_errors']} | {summary['shadow_errors']} |",
        "",
        f"- answer agreement: {_num(None if agreement is None else 100 * agreement, '{:.1f}')} %",
        f"- EM of the shadow's answers against production's: {_num(summary['exact_match'], '{:.1f}')}",
        f"- F1 of the shadow's answers against production's: {_num(summary['f1'], '{:.1f}')}",
        "",
        "Latency is measured by the box's runtime gateway, from sending a request to its instance to the answer "
        "(both sides at once, on the same machine).",
        "",
    ]
    return "\n".join(lines)


def write_report(summary: Mapping[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """`<endpoint>-shadow-report.json` and `.md` in `out_dir` (each written atomically)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{summary['endpoint'] or 'endpoint'}-shadow-report"
    paths = (out_dir / f"{stem}.json", out_dir / f"{stem}.md")
    for path, text in zip(paths, (json.dumps(summary, indent=2) + "\n", markdown(summary)), strict=True):
        fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return paths
