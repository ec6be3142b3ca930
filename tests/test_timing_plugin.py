from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sagebox.paths import REPO
from tests.timing_plugin import main, summarize

PLUGINS = ("-p", "tests.timing_plugin", "-p", "no:randomly", "-p", "no:cacheprovider")


def test_a_run_with_the_plugin_records_every_test_and_the_summary_orders_files_by_time(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        "import time\n\ndef test_slow():\n    time.sleep(0.3)\n\ndef test_fast():\n    pass\n"
    )
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
    assert sorted(r["id"].split("::")[-1] for r in rows) == ["test_fast", "test_one", "test_slow"]
    slow = next(r for r in rows if r["id"].endswith("test_slow"))
    assert slow["end"] - slow["start"] >= 0.3 and slow["worker"] == "-"
    lines = summarize(rows)
    assert lines[0].startswith("test_a.py: ") and lines[1].startswith("test_b.py: ")
    assert lines[-1].startswith("worker - finished at")


def test_the_summary_of_nothing_and_a_missing_file(tmp_path: Path) -> None:
    assert summarize([]) == ["no tests recorded"]
    assert main([str(tmp_path / "absent.jsonl")]) == 2
