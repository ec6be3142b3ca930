"""Serverless scale-to-zero decisions and the activity file the gateway writes for the control plane (no process,
no clock: times are passed in)."""

from __future__ import annotations

from pathlib import Path

from sagebox.box.serverless import ACTIVITY_FILE, Activity, decide, read_activity, write_activity


def test_the_activity_file_round_trips_and_tolerates_garbage(tmp_path: Path) -> None:
    assert read_activity(tmp_path) == {}
    written = {("ep", "AllTraffic"): Activity(100.5, 2, 1), ("ep", "b"): Activity(), ("other", "v"): Activity(3.0)}
    write_activity(tmp_path, written)
    assert read_activity(tmp_path) == written
    (tmp_path / ACTIVITY_FILE).write_text('{"ep": {"v": {"in_flight": "many"}}, "x": 3}')
    assert read_activity(tmp_path) == {}
    (tmp_path / ACTIVITY_FILE).write_text("{half")
    assert read_activity(tmp_path) == {}


def test_a_warm_variant_stops_only_after_the_idle_period_with_nothing_in_flight() -> None:
    def warm(activity: Activity | None, now: float) -> str | None:
        return decide(activity, warm=True, starting=False, warm_since=100.0, now=now, idle_real_s=6.0)

    assert warm(None, 105.9) is None  # started at 100, never used: idle from its start
    assert warm(None, 106.0) == "stop"
    assert warm(Activity(last_request_at=104.0), 109.0) is None  # a later request restarts the idle period
    assert warm(Activity(last_request_at=104.0), 110.0) == "stop"
    assert warm(Activity(last_request_at=50.0, in_flight=1), 1000.0) is None  # a long request in flight
    assert warm(Activity(last_request_at=50.0, waiting=1), 1000.0) is None


def test_a_cold_variant_starts_when_a_request_waits_and_only_once() -> None:
    def cold(activity: Activity | None, starting: bool = False) -> str | None:
        return decide(activity, warm=False, starting=starting, warm_since=0.0, now=500.0, idle_real_s=6.0)

    assert cold(None) is None and cold(Activity(last_request_at=499.0)) is None  # nobody waits
    assert cold(Activity(last_request_at=499.0, in_flight=1, waiting=1)) == "start"
    assert cold(Activity(last_request_at=499.0, in_flight=1, waiting=1), starting=True) is None
