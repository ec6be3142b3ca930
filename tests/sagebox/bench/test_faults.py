"""The fault benchmark's pure parts: how responses are classified, what the summaries count, the /proc parsers, and
the load drivers on an injected clock (tests/sagebox/test_fault_suite.py runs the faults themselves)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from sagebox.bench.faults import (
    ANSWER,
    DEADLINE,
    OTHER,
    RETRYABLE,
    Call,
    GatedClients,
    KillRun,
    Listener,
    OpenLoop,
    Reply,
    box_listeners,
    classify_invoke,
    classify_server,
    client_threads,
    counts,
    error_codes,
    in_flight_at,
    is_answer,
    listening_sockets,
    one_line,
    parse_listeners,
    parse_session_id,
    parse_vm_rss_kib,
    recovery_s,
    session_members,
    socket_inode,
    summarize_overload,
)

ANSWER_BODY = json.dumps({"answer": "the Amazon basin", "score": 1.5, "start": 3, "end": 19}).encode()


def error_body(status: int, message: str) -> bytes:
    return json.dumps({"error": "x", "status": status, "message": message}).encode()


def call(due: float, done: float, outcome: str = ANSWER, status: int = 200, code: str = "", detail: str = "") -> Call:
    return Call(due, done, Reply(outcome, status, code, detail))


# --- classification ---------------------------------------------------------------------------------------------


def test_a_server_answer_a_clean_refusal_and_a_deadline_are_told_apart() -> None:
    assert classify_server(200, ANSWER_BODY) == Reply(ANSWER, 200)
    assert classify_server(200, b"[" + ANSWER_BODY + b"," + ANSWER_BODY + b"]").outcome == ANSWER  # a batch
    refused = classify_server(503, error_body(503, "server is at capacity; retry later"))
    assert refused == Reply(RETRYABLE, 503, "ServiceUnavailable", "server is at capacity; retry later")
    late = classify_server(504, error_body(504, "inference took longer than 2s"))
    assert (late.outcome, late.code) == (OTHER, DEADLINE)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b'{"score": 1}'),  # 200 without an answer
        (200, b"[]"),
        (200, b"not json"),
        (503, b"<html>busy</html>"),  # a 503 without the JSON reason is not a clean refusal
        (500, error_body(500, "internal error")),
        (413, error_body(413, "too large")),
        (504, b"gateway timeout"),
    ],
)
def test_anything_else_from_a_server_is_other(status: int, body: bytes) -> None:
    reply = classify_server(status, body)
    assert reply.outcome == OTHER and reply.code != DEADLINE


@pytest.mark.parametrize(
    ("status", "code", "original", "outcome"),
    [
        (200, "", None, ANSWER),
        (503, "ServiceUnavailable", None, RETRYABLE),  # the gateway: no healthy instance, or unreachable
        (424, "ModelError", 503, RETRYABLE),  # the container's own 503 (loading, at capacity)
        (400, "ThrottlingException", None, RETRYABLE),
        (424, "ModelError", 500, OTHER),
        (424, "ModelError", 504, OTHER),  # the container did not answer in time
        (400, "ValidationError", None, OTHER),
        (0, "EndpointConnectionError", None, OTHER),  # the gateway itself is gone
    ],
)
def test_invoke_endpoint_outcomes(status: int, code: str, original: int | None, outcome: str) -> None:
    assert classify_invoke(status, code, original, "why").outcome == outcome


def test_an_answer_is_a_json_object_with_an_answer() -> None:
    assert is_answer(ANSWER_BODY)
    assert not is_answer(b"{}") and not is_answer(b"[]") and not is_answer(b"[1]") and not is_answer(b"\xff")


# --- summaries --------------------------------------------------------------------------------------------------


def test_recovery_counts_only_answers_to_requests_sent_after_the_fault() -> None:
    calls = [
        call(0.0, 0.1),
        call(9.9, 10.5),  # sent before the fault, answered after it: not a recovery
        call(10.0, 10.01, RETRYABLE, 503, "ServiceUnavailable"),
        call(11.0, 11.02, RETRYABLE, 424, "ModelError (503)"),
        call(13.0, 13.5),
        call(12.5, 13.2),  # the first answer to a request sent after the fault, whenever it was sent
    ]
    assert recovery_s(calls, 10.0) == pytest.approx(3.2)
    assert recovery_s(calls[:4], 10.0) is None
    assert in_flight_at(calls, 10.0) == [calls[1]]
    assert counts(calls) == {ANSWER: 4, RETRYABLE: 2, OTHER: 0}
    assert error_codes(calls) == {"ModelError (503)": 1, "ServiceUnavailable": 1}


def test_the_overload_summary_counts_admitted_refused_and_cut_requests() -> None:
    before = [call(i, i + 0.1) for i in range(4)]  # 100 ms each
    overload = [
        call(0.0, 1.5),
        call(0.1, 2.3),  # answered, but the client waited longer than the timeout (queueing on its side)
        call(0.2, 2.25, OTHER, 504, DEADLINE, "inference took longer than 2s"),
        call(0.3, 0.31, RETRYABLE, 503, "ServiceUnavailable", "at capacity"),
        call(0.4, 0.42, RETRYABLE, 503, "ServiceUnavailable", "at capacity"),
        call(0.5, 0.6, OTHER, 500, "", "boom"),
    ]
    after = [call(i, i + 0.2) for i in range(4)]
    summary = summarize_overload(before, overload, after, timeout_s=2.0)
    assert (summary["requests"], summary["admitted"], summary["answered"]) == (6, 3, 2)
    assert (summary["timed_out_504"], summary["refused_503"], summary["other"]) == (1, 2, 1)
    assert summary["admitted_share"] == pytest.approx(0.5) and summary["refused_share"] == pytest.approx(2 / 6)
    assert summary["admitted_over_timeout_client_side"] == 2
    assert summary["refused_latency"]["max_ms"] == pytest.approx(20.0)
    assert summary["after_over_before_p50"] == pytest.approx(2.0)
    assert summary["error_codes"] == {"ServiceUnavailable": 2, DEADLINE: 1, "HTTP 500": 1}


def test_a_kill_summary_says_what_clients_saw() -> None:
    calls = [call(0.0, 0.1), call(0.9, 1.2, RETRYABLE, 503, "ServiceUnavailable"), call(2.0, 2.1)]
    run = KillRun(
        killed_pid=10, replacement_pids=[11], restarts_before=0, restarts_after=1, calls=calls, killed_at=1.0,
        recovery_s=recovery_s(calls, 1.0), rate_qps=20.0,
    )  # fmt: skip
    summary = run.summary()
    assert summary["recovery_s"] == pytest.approx(1.1)
    assert summary["in_flight_at_kill"] == 1 and summary["failed_after_kill"] == 0
    assert summary["restarts"] == 1 and summary["replacement_pid_differs"]


def test_client_threads_cover_a_timeout_of_arrivals() -> None:
    assert client_threads(50.0, 2.0) == 150
    assert client_threads(1.0, 2.0) == 8
    assert client_threads(10_000.0, 60.0) == 1024


# --- /proc parsers ----------------------------------------------------------------------------------------------

TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2222 1 0
   2: 0100007F:1F90 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 3333 1 0
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when
   0: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4444 1 0
   1: 00000000000000000000000000000000:1F92 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 5555 1 0
   2: 0000000000000000FFFF00000100007F:1F93 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 6666 1 0
"""  # noqa: E501


def test_proc_net_tcp_listeners_are_decoded_and_only_loopback_counts_as_private() -> None:
    v4 = parse_listeners(TCP)
    assert [(item.host, item.port, item.inode) for item in v4] == [("127.0.0.1", 8080, 1111), ("0.0.0.0", 22, 2222)]
    v6 = parse_listeners(TCP6)
    assert [(item.host, item.port) for item in v6] == [("::1", 8081), ("::", 8082), ("::ffff:7f00:1", 8083)]
    assert [item.loopback for item in [*v4, *v6]] == [True, False, True, False, True]
    assert not Listener("10.0.0.5", 80, 1).loopback


def test_rss_session_and_socket_links_are_read() -> None:
    assert parse_vm_rss_kib("Name:\tpython\nVmPeak:\t 900 kB\nVmRSS:\t  123456 kB\n") == 123456
    with pytest.raises(ValueError, match="VmRSS"):
        parse_vm_rss_kib("Name:\tkthreadd\n")
    # The command name may hold spaces and parentheses; the session is the 4th field after it.
    assert parse_session_id("4242 (python (x) y) S 1 4242 4240 0 -1 4194560 0") == 4240
    assert socket_inode("socket:[98765]") == 98765
    assert socket_inode("pipe:[98765]") is None and socket_inode("/dev/null") is None


def fake_proc(root: Path, processes: dict[int, tuple[int, list[int]]]) -> Path:
    """A /proc with `pid -> (session, socket inodes)` and the TCP tables above."""
    (root / "net").mkdir(parents=True)
    (root / "net" / "tcp").write_text(TCP)
    (root / "net" / "tcp6").write_text(TCP6)
    (root / "self").mkdir()  # not a pid: skipped
    for pid, (session, inodes) in processes.items():
        fd = root / str(pid) / "fd"
        fd.mkdir(parents=True)
        (root / str(pid) / "stat").write_text(f"{pid} (python) S 1 {pid} {session} 0 -1 0")
        os.symlink("/dev/null", fd / "0")
        for n, inode in enumerate(inodes, start=3):
            os.symlink(f"socket:[{inode}]", fd / str(n))
    return root


def test_the_listeners_of_a_box_are_those_its_processes_and_their_sessions_hold(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        {
            100: (100, [1111, 3333]),  # a box process: a listener and a connection
            101: (100, [5555]),  # a child in its session, listening on ::
            200: (200, [2222]),  # another program's listener on 0.0.0.0: not the box's
        },
    )
    assert session_members([100], proc) == {100, 101}
    found = listening_sockets(session_members([100], proc), proc)
    assert [(item.host, item.port, item.pid) for item in found] == [("127.0.0.1", 8080, 100), ("::", 8082, 101)]
    assert [item.loopback for item in found] == [True, False]
    assert [item.pid for item in listening_sockets([200], proc)] == [200]
    # A process that is gone holds nothing: pid_max itself is never a pid (a fixed small pid, 999 once, was reused by a
    # serving process in a CI run: pids wrap at 32768 here).
    gone = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert box_listeners({"gateway": [gone]}) == []


def test_one_line_undoes_wrapping() -> None:
    assert (
        one_line("the embedded AWS ... is not\nrunning:  its endpoints")
        == "the embedded AWS ... is not running: its endpoints"
    )


# --- load drivers -----------------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            return self.t

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.t += seconds


def test_the_open_loop_sends_at_its_rate_and_times_from_each_scheduled_arrival() -> None:
    clock = FakeClock()
    replies = iter([Reply(ANSWER, 200), Reply(RETRYABLE, 503, "ServiceUnavailable", "busy")] * 10)
    lock = threading.Lock()

    def send() -> Reply:
        with lock:
            return next(replies)

    load = OpenLoop(send, rate_qps=10.0, workers=1, clock=clock, wait=clock.advance)
    calls = load.run(seconds=1.0)
    assert load.issued == 10 and len(calls) == 10
    assert [round(c.due - 100.0, 6) for c in calls] == [round(i * 0.1, 6) for i in range(10)]
    assert counts(calls) == {ANSWER: 5, RETRYABLE: 5, OTHER: 0}
    with pytest.raises(ValueError, match="rate_qps"):
        OpenLoop(send, rate_qps=0.0, workers=1)


def test_the_open_loop_can_be_waited_on_and_stopped() -> None:
    release = threading.Event()

    def send() -> Reply:
        release.wait()
        return Reply(ANSWER, 200)

    load = OpenLoop(send, rate_qps=1000.0, workers=4).start()
    release.set()
    assert load.wait_for(lambda calls: len(calls) >= 3)
    calls = load.stop()
    assert len(calls) == load.issued >= 3 and all(c.outcome == ANSWER for c in calls)


def test_paused_clients_start_nothing_new_and_their_outstanding_set_only_shrinks() -> None:
    gates = [threading.Event() for _ in range(3)]
    started = threading.Semaphore(0)
    count = 0
    lock = threading.Lock()

    def send() -> Reply:
        nonlocal count
        with lock:
            mine = gates[min(count, 2)]
            count += 1
        started.release()
        mine.wait()
        return Reply(ANSWER, 200)

    clients = GatedClients(send, clients=2, clock=FakeClock())
    clients.set(paused=False)
    clients.start()
    assert started.acquire(timeout=30) and started.acquire(timeout=30)  # both clients have a request out
    clients.set(paused=True)
    assert clients.snapshot() == frozenset({0, 1})
    gates[0].set()  # request 0 is answered; its client must not send another while paused
    assert clients.wait_answers(1, timeout_s=30)
    assert clients.snapshot() == frozenset({1}) and count == 2
    gates[1].set()
    gates[2].set()
    assert clients.wait_answers(2, timeout_s=30)
    clients.set(finished=True)
    clients.join()
    assert count == 2 and set(clients.calls) == {0, 1} and clients.snapshot() == frozenset()
