from __future__ import annotations

from pathlib import Path

import pytest

from sagebox.bench.cold_start import floor_seconds, parse_breakdown

LOG = """\
2026-12-06 03:41:35,359 INFO sagebox.server [pid 1] serving on port 5 with 1 worker(s), 2 intra-op thread(s) each, \
timeout 60s (server code imported 0.35s after the process started)
2026-12-06 03:41:35,717 INFO sagebox.server [pid 1] model ready in 0.19s, 0.62s after the process started (verify \
0.020s, runtime and session 0.092s, tokenizer 0.034s, warm-up 0.040s on buckets [64, 384]): task=question-answering
"""


def test_the_breakdown_is_read_from_the_servers_own_lines() -> None:
    parts = parse_breakdown(LOG)
    assert parts["imports_s"] == 0.35 and parts["load_s"] == 0.19 and parts["ready_after_start_s"] == 0.62
    assert parts["http_server_start_s"] == pytest.approx(0.62 - 0.19 - 0.35)
    assert (parts["verify_s"], parts["runtime_and_session_s"], parts["tokenizer_s"], parts["warm_up_s"]) == (
        0.02,
        0.092,
        0.034,
        0.04,
    )
    assert parts["warmed_buckets"] == [64, 384]
    assert parse_breakdown("no such lines") == {}
    assert "http_server_start_s" not in parse_breakdown(LOG.splitlines()[1])  # no import line: no server start


def test_the_floor_creates_the_models_session_in_a_fresh_interpreter(tiny_onnx_model_dir: Path) -> None:
    floor = floor_seconds(tiny_onnx_model_dir, threads=1)
    assert floor is not None and floor > 0
