"""The fault suite: real serving processes and a real box, hurt the way production hurts them (issue 15).

Each test runs a scenario of the fault benchmark (sagebox.bench.faults, which scripts/bench_faults.py times) and
asserts what clients must see, never how fast: every wait is for an event (an answer, a record in fleet.json, a
process gone) with a generous deadline that only guards against a hang.

- overload at 4x the measured one-client capacity for 20 s: only answers, 503s with a JSON reason, and 504s that
  the server itself counts (an admitted request it cut at its SAGEMAKER_MODEL_SERVER_TIMEOUT: the server stops the
  work and says so; how many is a figure of the benchmark, since it depends on how steady the machine is); right
  after, requests are answered; memory stays flat.
- SIGTERM under load: every request the server holds when the signal arrives is answered; exit 0.
- kill -9 of an endpoint's serving process under load: every response is an answer or a retryable error, and the
  endpoint answers again (the control plane replaced the instance).
- the box's embedded AWS killed: `sagebox status` says so, `sagebox up` brings the endpoint back; every process of
  the box listens on loopback only.
- a retry storm (48 clients that send again at once on every answer or 503) on the demo's architecture, the server
  pinned to one CPU: at most one admitted request in eight is cut at its deadline (none on a quiet machine), and
  the answers in time reach a floor of the capacity measured just before, which a server whose refusals starve the
  model does not reach.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sagebox.bench.faults import (
    ANSWER,
    DEADLINE,
    OTHER,
    RETRYABLE,
    BoxUrls,
    OverloadPlan,
    StormPlan,
    counts,
    delete_endpoint,
    deploy_endpoint,
    error_codes,
    request_body,
    run_kill,
    run_overload,
    run_restart,
    run_sigterm,
    run_storm,
)
from tests.conftest import EmbeddedAws

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.filterwarnings("ignore:Tried to parse AWS.* but it's not supported by moto:UserWarning"),
]

# Memory stays flat: RSS after the overload within 1.5x of RSS before it (both after warm-up). A server that queued
# the 3x excess instead of refusing it would hold ~800 requests of the 20 s run at once, each with its ~8 KB body
# and 7-8 tokenized windows (three 384-token int64 arrays each, ~9 KB, plus the tokenizer's encodings): several tens
# of MB on top of the tiny model server's ~120 MiB (measured RSS 121 MiB before; 133-151 MiB after).
RSS_GROWTH_BOUND = 1.5


def test_overload_at_four_times_capacity_is_answered_or_refused_at_once(
    tiny_onnx_model_dir: Path, tmp_path: Path
) -> None:
    run = run_overload(tiny_onnx_model_dir, tmp_path, OverloadPlan(timeout_s=2, factor=4.0, seconds=20.0))
    summary = run.summary()
    assert summary["other"] == 0, error_codes(run.overload)
    refused = [c for c in run.overload if c.outcome == RETRYABLE]
    answered = [c for c in run.overload if c.outcome == ANSWER]
    assert refused and answered  # 4x capacity: the server refused the excess and still answered
    assert all(c.reply.status == 503 and c.reply.detail for c in refused)  # each with its JSON reason
    # Every admitted request was answered or cut at its deadline by the server, which counted each one; every
    # refusal was the server's own "at capacity" decision.
    everything = [*run.warmup, *run.before, *run.overload, *run.after]
    admission = run.server_stats["admission"]
    assert sum(c.reply.code == DEADLINE for c in everything) == admission["timed_out"]
    assert sum(c.outcome == RETRYABLE for c in everything) == admission["refused_busy"]
    assert admission["refused_too_large"] == 0
    # Right after the overload the server answers again.
    assert run.after and all(c.outcome == ANSWER for c in run.after)
    assert run.rss_after_kib <= RSS_GROWTH_BOUND * run.rss_before_kib


def test_sigterm_under_load_answers_every_request_in_flight(tiny_onnx_model_dir: Path, tmp_path: Path) -> None:
    run = run_sigterm(tiny_onnx_model_dir, tmp_path, clients=4)
    assert run.in_flight, "no request was in flight at SIGTERM"
    assert [c.outcome for c in run.in_flight] == [ANSWER] * len(run.in_flight), [c.reply for c in run.in_flight]
    assert all(c.outcome == ANSWER for c in run.before)
    assert run.exit_code == 0
    assert any("drained after SIGTERM" in line for line in run.log_tail), run.log_tail


def test_kill_9_under_load_gives_answers_or_retryable_errors_and_the_endpoint_comes_back(
    embedded_aws: EmbeddedAws, tiny_model_tarball: Path
) -> None:
    from sagebox.box import processes

    box = BoxUrls(embedded_aws.url, embedded_aws.gateway_url, embedded_aws.state_dir)
    deploy_endpoint(box, "faults-kill", tiny_model_tarball)
    try:
        run = run_kill(box, "faults-kill", request_body(1), rate_qps=20.0, warm_answers=10, tail_answers=10)
    finally:
        delete_endpoint(box, "faults-kill")
    outcomes = counts(run.calls)
    assert outcomes[OTHER] == 0, error_codes(run.calls)
    assert run.recovery_s is not None  # a request sent after the kill was answered
    # The fault was seen: requests sent while the replacement started (a new Python process loading its model)
    # got retryable errors.
    assert outcomes[RETRYABLE] > 0
    assert run.restarts_after == run.restarts_before + 1
    assert run.replacement_pids and run.killed_pid not in run.replacement_pids
    assert not processes.alive(run.killed_pid)


def test_a_killed_embedded_aws_shows_in_status_and_up_recovers_with_every_socket_on_loopback(
    tiny_model_tarball: Path, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    (models / "fp32").mkdir(parents=True)
    shutil.copyfile(tiny_model_tarball, models / "fp32" / "model.tar.gz")
    run = run_restart(models, tmp_path / "state", "c6i-fp32", request_body(1))

    assert run.status_after_kill.returncode == 0, run.status_after_kill.stderr
    assert run.status_says_not_running, run.status_after_kill.stdout
    assert run.endpoint_status_after == "InService" and run.answered_after
    assert run.roles["embedded AWS"] != run.roles_after["embedded AWS"]
    # `ss -ltnp` for the box: each of its processes listens, and only on loopback (never 0.0.0.0 or ::).
    for roles, listeners in ((run.roles, run.listeners), (run.roles_after, run.listeners_after)):
        assert len(roles["serving"]) == 1
        expected = {pid for pids in roles.values() for pid in pids}
        assert expected <= {item.pid for item in listeners}, (roles, listeners)
        assert all(item.loopback for item in listeners), listeners


# The model thread's share of the CPU the server spent during the storm (its own threads' CPU time, not wall-clock
# time: other tests sharing the machine slow both threads alike). Measured with scripts/bench_faults.py --only storm
# (machine A, 2026-12-04): 51 % when the HTTP side took the CPU, 83 % since. The goodput over capacity (answers in
# time per second of measured capacity) is a wall-clock figure: the benchmark reports it (docs/benchmarks.md); as a
# test floor it failed under CI's contention (0.42 < 0.5 once, passing alone).
STORM_MODEL_CPU_SHARE_FLOOR = 0.6


@pytest.fixture(scope="module")
def minilm_qa_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 with a QA head, untrained (its answers do not matter here, its cost does), FP32 ONNX: model
    calls that cost more than the HTTP work around them, as the demo's do (the tiny test model's cost less)."""
    import torch
    from transformers import BertForQuestionAnswering

    from sagebox.demo.models import minilm_source_dir
    from sagebox.pipeline.export.servable import build_fp32
    from tests.model_factory import minilm_tokenizer_json

    folder = tmp_path_factory.mktemp("minilm-qa")
    torch.manual_seed(0)
    model = BertForQuestionAnswering.from_pretrained(str(minilm_source_dir()))
    model.config.architectures = ["BertForQuestionAnswering"]
    model.save_pretrained(folder / "hf")
    (folder / "hf" / "tokenizer.json").write_text(minilm_tokenizer_json(), encoding="utf-8")
    build_fp32(folder / "hf", folder / "fp32", runtime="onnxruntime")
    return folder / "fp32"


def test_a_retry_storm_leaves_the_model_its_cpu_and_nothing_admitted_is_late(
    minilm_qa_model_dir: Path, tmp_path: Path
) -> None:
    figures = run_storm(minilm_qa_model_dir, tmp_path, StormPlan(clients=48, seconds=10.0, capacity_seconds=4.0))
    assert figures["other"] == 0, figures
    assert figures["refused_503"] > 0, figures  # it was a storm: the queue was full
    # Admitted requests the server cut at their deadline (504). On a quiet machine none (docs/benchmarks.md), and none
    # with two busy loops on both CPUs beside it; but the other tests of a CI run can slow the model after admission
    # priced it, when a heavy phase of theirs starts mid-storm (CI on A: 1 of ~60 once, 4 of 35 once), so at most one
    # in eight. Commit b36817b's server cut 17 of ~80 (21 %) on a quiet machine. Answers read late by the clients are
    # not asserted here: in CI the clients' own CPU is shared too (3 of 46 read after 2 s once, the server having
    # answered in time); the benchmark reports them (none on a quiet machine).
    admitted = figures["answered"] + figures["timed_out_504"]
    assert figures["timed_out_504"] <= admitted / 8, json.dumps(figures)
    model_share = figures["inference_cpu_share"] / (figures["inference_cpu_share"] + figures["http_cpu_share"])
    assert model_share >= STORM_MODEL_CPU_SHARE_FLOOR, json.dumps(figures)
