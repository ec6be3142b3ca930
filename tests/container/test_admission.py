"""Admission control's arithmetic and the measured cost estimate, on numbers the tests choose."""

from __future__ import annotations

import pytest

from container.admission import Admission, EwmaCost, Overloaded, TooLarge, retry_after
from container.predictor import Predictor
from tests.container.fakes import GateHandler, fake_manifest


def test_the_estimate_starts_at_the_first_observation_then_moves_by_alpha() -> None:
    cost = EwmaCost(alpha=0.25, spread=0.0)  # the mean alone (the margin is tested below)
    assert cost.seconds(128) == 0.0  # nothing measured: nothing refused
    cost.observe(128, 1, 0.4)
    assert cost.seconds(128) == pytest.approx(0.4)
    cost.observe(128, 4, 0.8)  # 0.2 s per feature in a batch of four
    assert cost.seconds(128) == pytest.approx(0.4 + 0.25 * (0.2 - 0.4))
    assert cost.snapshot() == {128: pytest.approx(0.35)}


def test_an_unmeasured_bucket_is_priced_from_the_nearest_by_tokens() -> None:
    cost = EwmaCost(spread=0.0)
    cost.observe(64, 1, 0.1)
    cost.observe(384, 1, 0.9)
    assert cost.seconds(96) == pytest.approx(0.1 * 96 / 64)
    assert cost.seconds(320) == pytest.approx(0.9 * 320 / 384)
    margin = EwmaCost(spread=3.0)
    margin.observe(64, 1, 0.1)
    assert margin.seconds(96) == pytest.approx(margin.seconds(64) * 96 / 64)


def test_the_price_adds_spread_mean_deviations_which_steady_calls_wear_away() -> None:
    cost = EwmaCost(alpha=0.25, spread=3.0, beta=0.25)
    cost.observe(128, 1, 0.4)
    assert cost.seconds(128) == pytest.approx(0.4 + 3 * 0.2)  # the deviation starts at half the first sample
    cost.observe(128, 1, 0.2)
    deviation = 0.2 + 0.25 * (abs(0.2 - 0.4) - 0.2)  # updated against the mean before this sample
    mean = 0.4 + 0.25 * (0.2 - 0.4)
    assert cost.seconds(128) == pytest.approx(mean + 3 * deviation)
    assert cost.snapshot() == {128: pytest.approx(mean)}  # /stats shows the mean
    assert cost.expected(128) == pytest.approx(mean) and cost.expected(256) == pytest.approx(2 * mean)
    jittery = cost.seconds(128)
    for _ in range(60):
        cost.observe(128, 1, mean)
    assert cost.seconds(128) == pytest.approx(mean, abs=1e-6) and cost.seconds(128) < jittery


def test_the_margin_decides_only_whether_a_request_fits_behind_the_queue() -> None:
    admission = Admission(timeout_s=10.0)
    now = 100.0
    # Priced at 12 s with its margin, expected 8 s: not too large, and an idle server takes it (refusing it would
    # refuse it for good: no other call would run to wear the margin away).
    first = admission.admit([6.0, 6.0], now, now + 10.0, expected=8.0)
    with pytest.raises(Overloaded):  # behind 12 s of queue it does not fit
        admission.admit([3.0], now, now + 10.0, expected=2.0)
    admission.release(first)
    queued = admission.admit([4.0], now, now + 10.0, expected=3.0)
    admission.admit([5.0], now, now + 10.0, expected=4.0)  # 4 + 5 fits with margins
    with pytest.raises(Overloaded):
        admission.admit([2.0], now, now + 10.0, expected=0.5)  # 9 + 2 does not, though 9 + 0.5 would
    admission.release(queued)
    with pytest.raises(TooLarge, match=r"needs ~10\.5s"):
        admission.admit([1.0], now, now + 10.0, expected=10.5)  # too large is judged on the expected time
    assert (admission.admitted, admission.refused_busy, admission.refused_too_large) == (3, 2, 1)


def test_bad_observations_are_ignored_and_alpha_is_checked() -> None:
    cost = EwmaCost()
    cost.observe(64, 0, 1.0)
    cost.observe(64, 1, -1.0)
    assert cost.snapshot() == {}
    with pytest.raises(ValueError, match="alpha"):
        EwmaCost(alpha=0.0)
    with pytest.raises(ValueError, match="beta"):
        EwmaCost(beta=1.5)
    with pytest.raises(ValueError, match="spread"):
        EwmaCost(spread=-1.0)


def test_admission_holds_at_most_one_timeout_of_model_time() -> None:
    admission = Admission(timeout_s=10.0)
    now = 100.0
    first = admission.admit([3.0, 3.0], now, now + 10.0)
    assert admission.backlog_s == 6.0
    with pytest.raises(Overloaded, match=r"6\.0s of queued model time"):
        admission.admit([4.5], now, now + 10.0)
    admission.admit([4.0], now, now + 10.0)  # exactly fits
    assert admission.backlog_s == 10.0
    admission.release(first[:1])
    admission.release(first[:1])  # twice is harmless
    assert admission.backlog_s == 7.0
    assert (admission.admitted, admission.refused_busy, admission.refused_too_large) == (2, 1, 0)


def test_a_refusal_says_when_the_backlog_ahead_leaves_room() -> None:
    admission = Admission(timeout_s=10.0)
    admission.admit([3.0, 4.0], 0.0, 10.0)
    with pytest.raises(Overloaded) as refused:
        admission.admit([5.5], 0.0, 10.0)
    assert refused.value.retry_after_s == 3  # 7 s queued + 5.5 s needed - a fresh 10 s: 2.5 s, in whole seconds
    assert retry_after(0.2, 0.1, 10.0) == 1  # never 0: "retry at once" is what a storm does anyway
    assert retry_after(30.0, 9.0, 10.0) == 10  # never more than a whole timeout


def test_time_already_spent_counts_against_the_deadline() -> None:
    admission = Admission(timeout_s=10.0)
    arrived = 100.0
    with pytest.raises(Overloaded):
        admission.admit([2.0], arrived + 9.0, arrived + 10.0)  # a slow upload left 1 s
    admission.admit([1.0], arrived + 9.0, arrived + 10.0)


def test_work_longer_than_the_timeout_is_too_large_and_switching_off_admits_all() -> None:
    with pytest.raises(TooLarge, match="more than the 10s timeout"):
        Admission(timeout_s=10.0).admit([6.0, 6.0], 0.0, 10.0)
    off = Admission(timeout_s=10.0, enabled=False)
    off.admit([6.0, 6.0], 0.0, 10.0)
    off.admit([6.0, 6.0], 0.0, 10.0)
    assert off.backlog_s == 24.0 and off.admitted == 2


def test_the_predictor_times_every_model_call_on_its_timer() -> None:
    from container.qa import QAProcessor
    from container.tasks.question_answering import QuestionAnswering
    from tests.conftest import minilm_tokenizer_path

    ticks = iter([10.0, 10.25, 20.0, 20.75])
    seen: list[tuple[int, int, float]] = []
    processor = QAProcessor.from_file(str(minilm_tokenizer_path()), [64, 128], 128, 30)
    predictor = Predictor(
        fake_manifest(),
        GateHandler(),
        QuestionAnswering(processor),
        8,
        512,
        lambda *call: seen.append(call),
        lambda: next(ticks),
    )
    predictor.run([processor.filler_feature(64)] * 3 + [processor.filler_feature(128)])
    assert seen == [(64, 3, 0.25), (128, 1, 0.75)]


def test_precheck_prices_a_request_by_its_length_once_it_has_learnt_a_price() -> None:
    admission = Admission(timeout_s=10.0, alpha=0.5)
    admission.precheck(10_000, 0.0, 10.0)  # nothing learnt: never refuses
    admission.admit([6.0], 0.0, 10.0)
    admission.learn(1_000, 6.0)  # 6 ms a character
    admission.precheck(500, 0.0, 10.0)  # 6 + 3 s fits
    with pytest.raises(Overloaded):
        admission.precheck(1_000, 0.0, 10.0)  # 6 + 6 s does not
    admission.precheck(5_000, 0.0, 10.0)  # 30 s: bigger than the timeout, left to admit() to call 413
    admission.learn(1_000, 2.0)  # the price moves by alpha: 4 ms a character
    admission.precheck(1_000, 0.0, 10.0)
    assert (admission.refused_busy, admission.refused_before_tokenizing) == (1, 1)
    off = Admission(timeout_s=10.0, enabled=False)
    off.learn(1, 100.0)
    off.precheck(1_000, 0.0, 10.0)


def test_a_share_of_the_timeout_is_left_for_what_the_price_does_not_see() -> None:
    admission = Admission(timeout_s=10.0, share=0.75)
    admission.admit([3.0], 0.0, 10.0)
    admission.admit([4.0], 0.0, 10.0)  # 7 s queued: within 7.5
    with pytest.raises(Overloaded) as refused:
        admission.admit([1.0], 0.0, 10.0)  # 8 s would pass 7.5
    assert refused.value.retry_after_s == 1
    with pytest.raises(ValueError, match="share"):
        Admission(timeout_s=10.0, share=0.0)


def test_prices_scale_by_how_much_slower_admitted_work_ran_and_never_shrink() -> None:
    admission = Admission(timeout_s=10.0, alpha=0.5)
    admission.completed(priced_s=2.0, took_s=1.0)  # faster than priced (the margin): prices stay
    assert admission.slowdown == 1.0
    admission.completed(priced_s=2.0, took_s=6.0)  # three times slower: halfway there with alpha 0.5
    assert admission.slowdown == 2.0
    admission.admit([3.0], 0.0, 10.0)
    with pytest.raises(Overloaded):
        admission.admit([2.5], 0.0, 10.0)  # (3 + 2.5) x 2 = 11 s: past 10 s, where 5.5 s at face value would fit
    assert admission.backlog_s == 3.0


def test_a_request_that_cannot_fit_is_refused_unread_by_its_size_once_a_price_is_known() -> None:
    admission = Admission(timeout_s=10.0)
    assert admission.refuse_unread(1000, 0.0) is None  # nothing learnt yet: read it
    admission.learn(chars=1000, seconds=2.0, body_bytes=1000)  # 2 ms per byte
    admission.admit([9.0], 0.0, 10.0)
    refused = admission.refuse_unread(1000, 0.0)  # 9 s queued + 2 s > 10 s
    assert refused is not None and refused.retry_after_s == 1
    assert admission.refuse_unread(400, 0.0) is None  # 0.8 s fits
    assert admission.refuse_unread(6000, 0.0) is None  # bigger than the whole timeout: admit() says 413
    assert (admission.refused_busy, admission.refused_before_reading) == (1, 1)


def test_an_idle_server_takes_a_request_whatever_the_slowdown_says() -> None:
    admission = Admission(timeout_s=2.0, share=0.75)
    admission.learn(chars=100, seconds=0.2, body_bytes=100)
    for _ in range(20):  # an overload made admitted work run ten times slower than priced
        admission.completed(priced_s=0.2, took_s=2.0)
    assert admission.slowdown > 9.0
    assert admission.refuse_unread(100, 0.0) is None  # nothing queued: read it
    admission.precheck(100, 0.0, 2.0)  # and do not refuse it before tokenizing
    charges = admission.admit([0.2], 0.0, 2.0)  # it is admitted, and its answer wears the slowdown down
    admission.release(charges)
    admission.completed(priced_s=0.2, took_s=0.1)
    assert admission.slowdown < 9.0
