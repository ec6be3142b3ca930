"""Per-test timing for the suite's own time (tests/conftest.py FILE_SECONDS, docs/benchmarks.md), off by default.

`make test PYTEST_ARGS="-p tests.timing_plugin"` appends one JSON line per test to $SAGEBOX_TIMING_OUT (default
.sagebox/test-timing.jsonl): its node id, the xdist worker, wall-clock start and end, the CPU seconds of the worker
process and of the child processes it reaped meanwhile (a long-lived child is counted when it is reaped, so the
children column is a hint, not an account). `python -m tests.timing_plugin FILE` prints the per-file figures, the
longest first, as FILE_SECONDS takes them, and when each worker finished.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DEFAULT_OUT = ".sagebox/test-timing.jsonl"


def _cpu() -> tuple[float, float]:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time(), children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started, (own, children) = time.time(), _cpu()
    yield
    ended, (own_after, children_after) = time.time(), _cpu()
    out = Path(os.environ.get("SAGEBOX_TIMING_OUT", DEFAULT_OUT))
    out.parent.mkdir(parents=True, exist_ok=True)
    row = {
        "id": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
        "start": started,
        "end": ended,
        "cpu": round(own_after - own, 3),
        "children_cpu": round(children_after - children, 3),
    }
    with out.open("a") as f:  # one short line per write: workers' appends do not interleave
        f.write(json.dumps(row) + "\n")


def summarize(rows: list[dict[str, Any]]) -> list[str]:
    """Per file: wall seconds (setup + call + teardown of its tests), own CPU, children's CPU, when it ran; then when
    each worker finished, counted from the first test's start."""
    if not rows:
        return ["no tests recorded"]
    origin = min(r["start"] for r in rows)
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, float("inf"), 0.0])
    finished: dict[str, float] = defaultdict(float)
    for r in rows:
        f = files[r["id"].split("::", 1)[0]]
        f[0] += r["end"] - r["start"]
        f[1] += r["cpu"]
        f[2] += r["children_cpu"]
        f[3] = min(f[3], r["start"] - origin)
        f[4] = max(f[4], r["end"] - origin)
        finished[r["worker"]] = max(finished[r["worker"]], r["end"] - origin)
    lines = [
        f"{name}: {wall:.0f} s wall, {own:.0f} s CPU, children {kids:.0f} s, ran {first:.0f}-{last:.0f} s"
        for name, (wall, own, kids, first, last) in sorted(files.items(), key=lambda kv: -kv[1][0])
    ]
    lines += [f"worker {w} finished at {t:.0f} s" for w, t in sorted(finished.items())]
    return lines


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else DEFAULT_OUT)
    if not path.is_file():
        print(f"timing_plugin: no timings at {path}", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print("\n".join(summarize(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
