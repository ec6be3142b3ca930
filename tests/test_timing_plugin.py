from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sagebox.paths import REPO
from tests.timing_plugin import main, summarize

PLUGINS = ("-p", "tests.timing_plugin", "-p", "no:randomly", "-p", "no:cacheprovider")


def test_a_run_with_the_plugin_records_every_test_once(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def test_first():\n    pass\n\ndef test_second():\n    pass\n")
    (tmp_path / "test_b.py").write_text("def test_one():\n    pass\n")
    out = tmp_path / "timing.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *PLUGINS, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=REPO,
        env={"SAGEBOX_TIMING_OUT": str(out), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["test_a.py::test_first", "test_a.py::test_second", "test_b.py::test_one"]
    for row in rows:
        assert row["worker"] == "-"  # no xdist worker
        assert row["end"] >= row["start"] and row["cpu"] >= 0 and row["children_cpu"] >= 0


def test_the_summary_orders_files_by_their_tests_time_and_says_when_each_worker_finished() -> None:
    def row(test: str, worker: str, start: float, end: float) -> dict[str, object]:
        return {"id": test, "worker": worker, "start": start, "end": end, "cpu": 1.0, "children_cpu": 0.5}

    rows = [
        row("a.py::t1", "gw0", 100.0, 101.0),
        row("b.py::t1", "gw1", 100.0, 103.0),
        row("a.py::t2", "gw0", 101.0, 102.0),
    ]
    assert summarize(rows) == [
        "b.py: 3 s wall, 1 s CPU, children 0 s, ran 0-3 s",
        "a.py: 2 s wall, 2 s CPU, children 1 s, ran 0-2 s",
        "worker gw0 finished at 2 s",
        "worker gw1 finished at 3 s",
    ]


def test_the_summary_of_nothing_and_a_missing_file(tmp_path: Path) -> None:
    assert summarize([]) == ["no tests recorded"]
    assert main([str(tmp_path / "absent.jsonl")]) == 2
