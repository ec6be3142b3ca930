"""Fault benchmark: what clients see when a serving process is overloaded, stopped or killed, or when the box's
embedded AWS dies, measured on real processes (`scripts/bench_faults.py`; `cli` documents the scenarios).

One module per scenario over shared parts, so that each reads on its own:

- `overload`, `storm`, `sigterm`, `kill`, `restart`: the scenarios, each a `run_*` returning a run whose
  `summary()` is its figures in the results JSON (`run_storm` returns the figures themselves);
- `load`: the request, the serving-process client and the open- and closed-loop drivers they share;
- `outcomes`: how a response is classified (answer, retryable, other) and the tallies the summaries count;
- `procfs`: /proc readers (RSS, sessions, listening sockets); `box`: the embedded box the kill and restart drive;
- `waits`: the hang guard and `poll`; `report`: the results JSON and the printed lines; `cli`: the command line.

The names below were those of the single module this package replaces; they are re-exported so that imports of
`sagebox.bench.faults` keep working.
"""

from __future__ import annotations

from sagebox.bench.faults.box import (
    BUCKET,
    IMAGE,
    ROLE,
    TARGET_OF_VARIANT,
    BoxUrls,
    Invoker,
    box_client,
    delete_endpoint,
    deploy_endpoint,
    embedded_box,
    package_for_box,
    restarts,
    serving_pids,
)
from sagebox.bench.faults.cli import SCENARIOS, main
from sagebox.bench.faults.kill import KillRun, run_kill
from sagebox.bench.faults.load import OpenLoop, Send, ServerClient, closed_loop, request_body
from sagebox.bench.faults.outcomes import (
    ANSWER,
    DEADLINE,
    OTHER,
    RETRYABLE,
    RETRYABLE_CODES,
    Call,
    Reply,
    classify_invoke,
    classify_server,
    counts,
    error_codes,
    error_message,
    in_flight_at,
    is_answer,
    latency_summary,
    recovery_s,
)
from sagebox.bench.faults.overload import OverloadPlan, OverloadRun, client_threads, run_overload, summarize_overload
from sagebox.bench.faults.procfs import (
    Listener,
    RssSampler,
    listening_sockets,
    parse_listeners,
    parse_session_id,
    parse_vm_rss_kib,
    rss_kib,
    session_members,
    socket_inode,
)
from sagebox.bench.faults.restart import (
    CliRunner,
    RestartRun,
    box_listeners,
    box_roles,
    one_line,
    run_restart,
    sagebox_cli,
    wait_gone,
)
from sagebox.bench.faults.sigterm import GatedClients, SigtermRun, run_sigterm
from sagebox.bench.faults.storm import StormPlan, run_storm
from sagebox.bench.faults.waits import HANG_GUARD_S, poll

__all__ = [
    "ANSWER",
    "BUCKET",
    "DEADLINE",
    "HANG_GUARD_S",
    "IMAGE",
    "OTHER",
    "RETRYABLE",
    "RETRYABLE_CODES",
    "ROLE",
    "SCENARIOS",
    "TARGET_OF_VARIANT",
    "BoxUrls",
    "Call",
    "CliRunner",
    "GatedClients",
    "Invoker",
    "KillRun",
    "Listener",
    "OpenLoop",
    "OverloadPlan",
    "OverloadRun",
    "Reply",
    "RestartRun",
    "RssSampler",
    "Send",
    "ServerClient",
    "SigtermRun",
    "StormPlan",
    "box_client",
    "box_listeners",
    "box_roles",
    "classify_invoke",
    "classify_server",
    "client_threads",
    "closed_loop",
    "counts",
    "delete_endpoint",
    "deploy_endpoint",
    "embedded_box",
    "error_codes",
    "error_message",
    "in_flight_at",
    "is_answer",
    "latency_summary",
    "listening_sockets",
    "main",
    "one_line",
    "package_for_box",
    "parse_listeners",
    "parse_session_id",
    "parse_vm_rss_kib",
    "poll",
    "recovery_s",
    "request_body",
    "restarts",
    "rss_kib",
    "run_kill",
    "run_overload",
    "run_restart",
    "run_sigterm",
    "run_storm",
    "sagebox_cli",
    "serving_pids",
    "session_members",
    "socket_inode",
    "summarize_overload",
    "wait_gone",
]
