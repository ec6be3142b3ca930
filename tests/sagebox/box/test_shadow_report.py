"""The shadow report: answer agreement, EM/F1 of the shadow's answers against production's, P50/P90 of each side,
from the records the gateway appends; and `sagebox shadow-report` writing it as JSON and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.box import shadow
from sagebox.box.shadow import ShadowRecord, Side
from sagebox.cli.app import main


def record(
    at: float, prod: str | None, cand: str | None, prod_ms: float, cand_ms: float, cand_status: int = 200
) -> ShadowRecord:
    return ShadowRecord(
        at,
        "sagebox-c6i-shadow",
        Side("int8", 200 if prod is not None else 500, prod_ms, prod),
        Side("fp32-shadow", cand_status, cand_ms, cand),
    )


RECORDS = [
    record(1.0, "the Amazon basin", "Amazon basin", 10.0, 40.0),  # same after SQuAD normalization
    record(2.0, "South America", "South America", 20.0, 50.0),
    record(3.0, "the Amazon rainforest", "rainforest", 30.0, 60.0),  # partial overlap: F1 2/3
    record(4.0, "Brazil", "Peru", 40.0, 70.0),
    record(5.0, "Brazil", None, 50.0, 80.0, cand_status=500),  # the shadow failed
    ShadowRecord(6.0, "sagebox-c6i-shadow", Side("int8", 200, 60.0, "x"), None),  # the copy was dropped
]


def test_the_report_compares_answers_and_latencies() -> None:
    summary = shadow.report(RECORDS)
    assert (summary["requests"], summary["mirrored"], summary["dropped"], summary["compared"]) == (6, 5, 1, 4)
    assert (summary["shadow_errors"], summary["production_errors"]) == (1, 0)
    assert summary["agreement"] == 0.5  # two of the four compared answers agree
    assert summary["exact_match"] == 50.0
    assert summary["f1"] == pytest.approx(100 * (1 + 1 + 2 / 3 + 0) / 4)
    # P50/P90 over the mirrored requests (linear interpolation): production 10..50 ms, shadow 40..80 ms.
    assert summary["production_latency"] == {"p50_ms": 30.0, "p90_ms": pytest.approx(46.0)}
    assert summary["shadow_latency"] == {"p50_ms": 60.0, "p90_ms": pytest.approx(76.0)}
    assert summary["variants"] == {"production": ["int8"], "shadow": ["fp32-shadow"]}
    empty = shadow.report([])
    assert empty["agreement"] is None and empty["production_latency"]["p50_ms"] is None
    assert "answer agreement: - %" in shadow.markdown(empty)


def test_answers_are_read_from_qa_replies_else_from_the_body() -> None:
    assert shadow.answer_of(200, b'{"answer": "Amazon", "score": 0.4}') == "Amazon"
    assert shadow.answer_of(200, b"plain text") == "plain text"
    assert shadow.answer_of(200, b'{"labels": [1, 2]}') == '{"labels": [1, 2]}'
    assert shadow.answer_of(424, b'{"answer": "ignored"}') is None


def test_records_round_trip_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    shadow.append(tmp_path, RECORDS[:3])
    with shadow.log_path(tmp_path, "sagebox-c6i-shadow").open("a") as fh:
        fh.write('{"at": 7, "endpoint": "sagebox-c6i-sh')  # a gateway stopped mid-write
    shadow.append(tmp_path, RECORDS[3:])
    assert shadow.load(tmp_path, "sagebox-c6i-shadow")[:3] == RECORDS[:3]
    assert len(shadow.load(tmp_path, "sagebox-c6i-shadow")) == len(RECORDS) - 1  # the record after the tear too


def test_the_cli_writes_json_and_markdown_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shadow.append(tmp_path, RECORDS)
    out = tmp_path / "reports"
    assert main(["shadow-report", "c6i-shadow", "--state-dir", str(tmp_path), "--out", str(out)]) == 0
    written = json.loads((out / "sagebox-c6i-shadow-shadow-report.json").read_text())
    assert written == json.loads(json.dumps(shadow.report(RECORDS)))
    markdown = (out / "sagebox-c6i-shadow-shadow-report.md").read_text()
    assert "# Shadow report: sagebox-c6i-shadow" in markdown and "answer agreement: 50.0 %" in markdown
    assert "| P50 latency (ms) | 30.0 | 60.0 |" in markdown
    assert "6 request(s) sampled for a copy (production served others unrecorded), 5 mirrored (1 copies" in markdown
    assert "wrote " in capsys.readouterr().out


def test_the_cli_says_in_one_line_when_there_is_nothing_to_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["shadow-report", "nope", "--state-dir", str(tmp_path)]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("sagebox: error: no shadow records for 'nope'") and "\n" not in error
