"""Featurization to buckets with doc stride, and span decoding, against hand-checked cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from container.qa import Feature, InputTooLong, QAProcessor, best_span, pick_bucket
from tests.conftest import minilm_tokenizer_path


@pytest.fixture(scope="module")
def processor() -> QAProcessor:
    return QAProcessor.from_file(str(minilm_tokenizer_path()), [16, 32, 64], doc_stride=8, max_answer_tokens=5)


def test_pick_bucket_takes_the_smallest_that_fits() -> None:
    assert pick_bucket(1, [16, 32]) == 16
    assert pick_bucket(16, [16, 32]) == 16
    assert pick_bucket(17, [16, 32]) == 32
    with pytest.raises(ValueError, match="exceed"):
        pick_bucket(33, [16, 32])


def test_short_pair_is_padded_only_to_its_bucket(processor: QAProcessor) -> None:
    [feature] = processor.featurize("who?", "alice met bob")
    # [CLS] who ? [SEP] alice met bob [SEP] = 8 tokens -> bucket 16
    assert feature.length == 8
    assert feature.bucket == 16
    assert feature.attention_mask.tolist() == [1] * 8 + [0] * 8
    assert feature.token_type_ids[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert feature.context_mask[:8].tolist() == [False] * 4 + [True] * 3 + [False]
    assert not feature.context_mask[8:].any()
    assert feature.input_ids.dtype == np.int64


def test_long_context_is_split_with_the_doc_stride(processor: QAProcessor) -> None:
    context = " ".join(f"w{i}" for i in range(60))  # each "wN" is 2+ word pieces
    features = processor.featurize("which?", context)
    assert len(features) > 1
    assert all(f.bucket == 64 for f in features[:-1])
    assert features[-1].bucket <= 64
    # Consecutive windows overlap by exactly `doc_stride` context tokens.
    for left, right in itertools.pairwise(features):
        left_spans = [left.offsets[i] for i in np.flatnonzero(left.context_mask)]
        right_spans = [right.offsets[i] for i in np.flatnonzero(right.context_mask)]
        assert left_spans[-8:] == right_spans[:8]
    # Together the windows cover the whole context.
    last = features[-1]
    assert last.offsets[int(np.flatnonzero(last.context_mask)[-1])][1] == len(context)


def test_question_too_long_for_the_largest_bucket(processor: QAProcessor) -> None:
    with pytest.raises(InputTooLong, match="question is too long"):
        processor.featurize("why " * 70, "short context")


def test_best_span_without_context_is_none() -> None:
    assert best_span(np.zeros(4), np.zeros(4), np.zeros(4, dtype=bool), 3) is None


def test_best_span_maximises_start_times_end_within_the_window() -> None:
    mask = np.array([False, True, True, True, True, False])
    start = np.array([9.0, 0.0, 3.0, 0.0, 0.0, 9.0])  # position 0 and 5 are outside the context
    end = np.array([9.0, 0.0, 0.0, 0.0, 4.0, 9.0])
    span = best_span(start, end, mask, max_answer_tokens=5)
    assert span is not None
    score, i, j = span
    assert (i, j) == (2, 4)
    p_start = np.exp(3.0) / (np.exp(3.0) + 3)
    p_end = np.exp(4.0) / (np.exp(4.0) + 3)
    assert score == pytest.approx(p_start * p_end)


def test_best_span_respects_order_and_max_length() -> None:
    mask = np.ones(6, dtype=bool)
    start = np.array([0.0, 0.0, 0.0, 0.0, 5.0, 0.0])
    end = np.array([0.0, 6.0, 0.0, 0.0, 0.0, 0.0])  # best end lies before the best start
    span = best_span(start, end, mask, max_answer_tokens=6)
    assert span is not None
    _, i, j = span
    assert i <= j
    start = np.array([5.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    end = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 6.0])  # span 0..5 is 6 tokens long
    span = best_span(start, end, mask, max_answer_tokens=3)
    assert span is not None
    _, i, j = span
    assert j - i + 1 <= 3


def test_decode_maps_tokens_back_to_the_original_characters(processor: QAProcessor) -> None:
    context = "Alice met Bob in PARIS yesterday."
    [feature] = processor.featurize("where?", context)
    target = [
        i for i, (s, e) in enumerate(feature.offsets) if context[s:e] == "paris".upper() and feature.context_mask[i]
    ]
    assert target, feature.offsets
    start = np.full(feature.bucket, -5.0)
    end = np.full(feature.bucket, -5.0)
    start[target[0]] = end[target[0]] = 5.0
    answer = processor.decode(context, [feature], [(start, end)])
    assert answer.text == "PARIS"
    assert context[answer.start : answer.end] == "PARIS"


def test_decode_picks_the_best_window(processor: QAProcessor) -> None:
    context = " ".join(f"w{i}" for i in range(60))
    features = processor.featurize("which?", context)
    logits = []
    for n, f in enumerate(features):
        s = np.zeros(f.bucket)
        e = np.zeros(f.bucket)
        if n == len(features) - 1:
            k = int(np.flatnonzero(f.context_mask)[-1])
            s[k] = e[k] = 20.0
        logits.append((s, e))
    answer = processor.decode(context, features, logits)
    assert context.endswith(answer.text) and answer.text


def test_filler_feature_fills_each_bucket(processor: QAProcessor) -> None:
    for bucket in processor.buckets:
        f: Feature = processor.filler_feature(bucket)
        assert f.bucket == bucket and f.length == bucket and f.attention_mask.all()


def test_best_span_equals_exhaustive_search() -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(1, 60))
        mask = np.zeros(n + 4, dtype=bool)
        mask[2 : 2 + n] = True
        start, end = rng.normal(size=n + 4) * 3, rng.normal(size=n + 4) * 3
        width = int(rng.integers(1, 40))
        span = best_span(start, end, mask, width)
        assert span is not None
        p_s = np.exp(start[2 : 2 + n] - start[2 : 2 + n].max())
        p_s /= p_s.sum()
        p_e = np.exp(end[2 : 2 + n] - end[2 : 2 + n].max())
        p_e /= p_e.sum()
        best = max((p_s[i] * p_e[j], i, j) for i in range(n) for j in range(i, min(n, i + width)))
        assert span[0] == pytest.approx(best[0]), trial
        assert (span[1], span[2]) == (best[1] + 2, best[2] + 2)


def test_best_span_over_a_context_with_holes_searches_context_tokens_only() -> None:
    mask = np.array([False, True, False, True, True, False])
    start = np.array([9.0, 1.0, 9.0, 0.0, 0.0, 9.0])
    end = np.array([9.0, 0.0, 9.0, 0.0, 2.0, 9.0])
    span = best_span(start, end, mask, max_answer_tokens=3)
    assert span is not None
    assert span[1:] == (1, 4)  # positions 0, 2 and 5 are not context, whatever their logits
