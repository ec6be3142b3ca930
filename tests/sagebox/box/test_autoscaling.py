"""Target tracking's decisions on hand-made per-minute metrics and an injected box time."""

from __future__ import annotations

from sagebox.box.autoscaling import Bounds, History, TargetTracking, decide, record

POLICY = TargetTracking(target=600.0, scale_in_cooldown_s=300.0, scale_out_cooldown_s=60.0)
BOUNDS = Bounds(min_capacity=1, max_capacity=4)


def test_three_minutes_above_target_scale_out_in_proportion_within_bounds() -> None:
    history = History()
    assert decide(POLICY, BOUNDS, 1, [1300.0, 1300.0], 180.0, history) is None  # two minutes are not enough
    assert decide(POLICY, BOUNDS, 1, [1300.0, 500.0, 1300.0], 180.0, history) is None  # not consecutive
    decision = decide(POLICY, BOUNDS, 1, [1300.0, 1300.0, 1300.0], 180.0, history)
    assert decision is not None and decision.desired == 3  # ceil(1 x 1300 / 600)
    assert "3 minutes above the target of 600" in decision.cause
    huge = decide(POLICY, BOUNDS, 2, [9000.0] * 3, 180.0, history)
    assert huge is not None and huge.desired == 4  # MaxCapacity


def test_scale_out_cooldown_blocks_another_scale_out_but_not_for_ever() -> None:
    history = History()
    first = decide(POLICY, BOUNDS, 1, [1300.0] * 3, 180.0, history)
    assert first is not None
    record(history, first, 1, 180.0)
    assert decide(POLICY, BOUNDS, 3, [2000.0] * 4, 200.0, history) is None  # 20 s after: cooling down
    later = decide(POLICY, BOUNDS, 3, [2000.0] * 4, 240.0, history)
    assert later is not None and later.desired == 4


def test_fifteen_minutes_below_ninety_percent_scale_in_and_idle_minutes_count_as_zero() -> None:
    history = History()
    assert decide(POLICY, BOUNDS, 3, [100.0] * 14, 900.0, history) is None
    assert decide(POLICY, BOUNDS, 3, [100.0] * 14 + [560.0], 900.0, history) is None  # 560 >= 90 % of 600
    decision = decide(POLICY, BOUNDS, 3, [100.0] * 14 + [None], 900.0, history)
    assert decision is not None and decision.desired == 1  # MinCapacity; an idle minute is 0 invocations
    record(history, decision, 3, 900.0)
    assert decide(POLICY, BOUNDS, 2, [100.0] * 15, 1000.0, history) is None  # scale-in cooldown
    # A scale-out is not held back by the scale-in cooldown.
    out = decide(POLICY, BOUNDS, 1, [100.0] * 12 + [1300.0] * 3, 1000.0, history)
    assert out is not None and out.desired == 3


def test_suspended_or_disabled_scale_in_and_capacity_outside_bounds() -> None:
    idle = [0.0] * 15
    assert decide(TargetTracking(600.0, disable_scale_in=True), BOUNDS, 3, idle, 0.0, History()) is None
    assert decide(POLICY, Bounds(1, 4, scale_in_suspended=True), 3, idle, 0.0, History()) is None
    assert decide(POLICY, Bounds(1, 4, scale_out_suspended=True), 1, [5000.0] * 3, 0.0, History()) is None
    raised = decide(POLICY, Bounds(2, 4), 1, [], 0.0, History())
    assert raised is not None and raised.desired == 2 and "outside MinCapacity..MaxCapacity" in raised.cause
