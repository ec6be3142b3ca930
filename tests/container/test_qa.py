"""Featurization to buckets with doc stride, and span decoding, against hand-checked cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from tokenizers import Tokenizer

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


# --- answers start and end on word boundaries (issue 17) ---------------------------------------------------------


def _token_index(feature: Feature, context: str, text: str) -> int:
    [index] = [i for i, (s, e) in enumerate(feature.offsets) if feature.context_mask[i] and context[s:e] == text]
    return index


def test_a_continuation_piece_never_starts_an_answer(processor: QAProcessor) -> None:
    context = "It costs £45 in Dublin."
    [feature] = processor.featurize("how much?", context)
    pound, digits = _token_index(feature, context, "£"), _token_index(feature, context, "45")
    assert digits == pound + 1  # "£45" is one word: "£" + "##45"
    start = np.full(feature.bucket, -5.0)
    end = np.full(feature.bucket, -5.0)
    start[digits], start[pound], end[digits] = 10.0, 0.0, 10.0  # the model prefers to start inside the word
    assert best_span(start, end, feature.context_mask, 5)[1:] == (digits, digits)  # type: ignore[index]
    answer = processor.decode(context, [feature], [(start, end)])
    assert answer.text == "£45" and context[answer.start : answer.end] == "£45"


def test_a_span_never_ends_inside_a_word(processor: QAProcessor) -> None:
    context = "Nobody believed it: unbelievably, it worked."
    [feature] = processor.featurize("what?", context)
    pieces = [context[s:e] for (s, e), c in zip(feature.offsets, feature.context_mask, strict=False) if c]
    assert "un" in pieces and len([p for p in pieces if p in "unbelievably" and p != "it"]) > 2
    first_piece = _token_index(feature, context, "un")
    last_piece = _token_index(feature, context, "bly")
    start = np.full(feature.bucket, -5.0)
    end = np.full(feature.bucket, -5.0)
    # The model prefers "belie" ("llin"-style: inside the word at both ends), and "unbelievably" after that.
    start[first_piece + 1], end[first_piece + 2] = 10.0, 10.0
    start[first_piece], end[last_piece] = 0.0, 0.0
    unrestricted = best_span(start, end, feature.context_mask, 5)
    assert unrestricted is not None and unrestricted[1:] == (first_piece + 1, first_piece + 2)
    answer = processor.decode(context, [feature], [(start, end)])
    assert answer.text == "unbelievably"


def test_no_allowed_span_within_reach_is_no_span() -> None:
    mask = np.ones(4, dtype=bool)
    starts, ends = np.array([True, False, False, False]), np.array([False, False, False, True])
    assert best_span(np.zeros(4), np.zeros(4), mask, 2, starts, ends) is None  # the only word is 4 pieces long
    assert best_span(np.zeros(4), np.zeros(4), mask, 4, starts, ends) == pytest.approx((1.0, 0, 3))


def test_restricted_best_span_equals_exhaustive_search() -> None:
    rng = np.random.default_rng(17)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        mask = np.zeros(n + 3, dtype=bool)
        mask[1 : 1 + n] = True
        start, end = rng.normal(size=n + 3) * 3, rng.normal(size=n + 3) * 3
        can_start, can_end = rng.random(n + 3) < 0.6, rng.random(n + 3) < 0.6
        width = int(rng.integers(1, 30))
        span = best_span(start, end, mask, width, can_start, can_end)
        allowed_s = [i for i in range(1, 1 + n) if can_start[i]]
        allowed_e = [j for j in range(1, 1 + n) if can_end[j]]
        pairs = [(i, j) for i in allowed_s for j in allowed_e if i <= j < i + width]
        if not pairs:
            assert span is None, trial
            continue
        norm_s = np.log(np.exp(start[allowed_s]).sum())
        norm_e = np.log(np.exp(end[allowed_e]).sum())
        best = max((np.exp(start[i] - norm_s + end[j] - norm_e), i, j) for i, j in pairs)
        assert span is not None, trial
        assert span[0] == pytest.approx(best[0]), trial
        assert (span[1], span[2]) == (best[1], best[2]), trial


WORDS = ["unbelievably", "£45", "co-op", "2024-05-01", "naïve", "中国人", "Dublin", "x", "ab12cd", "(Paris)", "U.S."]


@pytest.fixture(scope="module")
def untruncated() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(minilm_tokenizer_path()))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _reference_bounds(tokenizer: Tokenizer, context: str) -> dict[tuple[int, int], tuple[bool, bool]]:
    """Per context token (by its character span), from ONE untruncated encoding, the slow obvious way: a token
    starts a word when the token before it belongs to another word, and no letter or digit touches its start."""
    encoding = tokenizer.encode("q", context)
    sequences, words, offsets = encoding.sequence_ids, encoding.word_ids, encoding.offsets
    tokens = [(w, o) for s, w, o in zip(sequences, words, offsets, strict=True) if s == 1]

    def inside(k: int) -> bool:
        def word_char(c: str) -> bool:
            return c.isalnum() and not ("\u4e00" <= c <= "\u9fff")

        return 0 < k < len(context) and word_char(context[k - 1]) and word_char(context[k])

    reference = {}
    for n, (word, (start, end)) in enumerate(tokens):
        first = n == 0 or tokens[n - 1][0] != word
        last = n == len(tokens) - 1 or tokens[n + 1][0] != word
        reference[(start, end)] = (first and not inside(start), last and not inside(end))
    return reference


@pytest.mark.parametrize("stride", [0, 1, 3, 8])
def test_word_bounds_across_windows_match_one_untruncated_encoding(stride: int, untruncated: Tokenizer) -> None:
    processor = QAProcessor(untruncated, [16, 24], doc_stride=stride, max_answer_tokens=5)
    rng = np.random.default_rng(stride)
    for trial in range(25):
        context = " ".join(str(w) for w in rng.choice(WORDS, size=int(rng.integers(1, 30))))
        reference = _reference_bounds(untruncated, context)
        features = processor.featurize("which?", context)
        checked = 0
        for feature in features:
            assert feature.can_start is not None and feature.can_end is not None
            for i in np.flatnonzero(feature.context_mask):
                expected = reference[feature.offsets[i]]
                assert (bool(feature.can_start[i]), bool(feature.can_end[i])) == expected, (trial, context, i)
                checked += 1
            assert not (feature.can_start & ~feature.context_mask).any()
        assert checked >= len(reference)  # every context token was seen in some window


def test_decoded_answers_start_and_end_on_word_boundaries(processor: QAProcessor) -> None:
    rng = np.random.default_rng(23)
    words = ["unbelievably", "£45", "Dublin", "cost", "naïve", "ab12cd"]
    for trial in range(100):
        context = " ".join(str(w) for w in rng.choice(words, size=int(rng.integers(2, 25))))
        features = processor.featurize("what?", context)
        logits = [(rng.normal(size=f.bucket) * 4, rng.normal(size=f.bucket) * 4) for f in features]
        answer = processor.decode(context, features, logits)
        if not answer.text:
            continue
        assert answer.start == 0 or context[answer.start - 1] == " ", (trial, context, answer)
        assert answer.end == len(context) or context[answer.end] == " ", (trial, context, answer)


def test_no_answer_starts_or_ends_between_two_letters_or_digits_whatever_the_tokenizer_splits(
    untruncated: Tokenizer,
) -> None:
    from tokenizers import pre_tokenizers

    splitting = Tokenizer.from_str(untruncated.to_str())  # a pre-tokenizer that makes "12" two words of "ab12cd"
    splitting.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Digits(individual_digits=True)]
    )
    processor = QAProcessor(splitting, [32], doc_stride=8, max_answer_tokens=5)
    context = "call ab12cd now"
    [feature] = processor.featurize("what?", context)
    flags = {
        context[s:e]: (bool(feature.can_start[i]), bool(feature.can_end[i]))  # type: ignore[index]
        for i, (s, e) in enumerate(feature.offsets)
        if feature.context_mask[i]
    }
    assert flags == {
        "call": (True, True),
        "ab": (True, False),
        "1": (False, False),
        "2": (False, False),
        "cd": (False, True),
        "now": (True, True),
    }
