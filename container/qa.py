"""Extractive QA text logic: question/context -> bucketed model features, and logits -> an answer span.

Pure functions over a `tokenizers.Tokenizer`; no model, no HTTP.
"""

from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass, field

import numpy as np
from tokenizers import Encoding, Tokenizer

from container.tasks.base import InputTooLong
from container.tasks.text import pad_id as _pad_id
from container.tasks.text import padded, pick_bucket

# Smallest window of context tokens worth sending next to the question.
MIN_CONTEXT_TOKENS = 8
# Padding for the end-logit windows of best_span, sliced rather than allocated per call (longer answers allocate).
_NEG_INF = np.full(1024, -np.inf, dtype=np.float32)


@dataclass(frozen=True)
class Feature:
    """One model input window: the question plus a slice of the context, padded to its bucket."""

    input_ids: np.ndarray  # int64 [bucket]
    attention_mask: np.ndarray  # int64 [bucket]
    token_type_ids: np.ndarray  # int64 [bucket]
    context_mask: np.ndarray  # bool [bucket]: True where the token belongs to the context
    offsets: tuple[tuple[int, int], ...]  # char span in the context of each unpadded token
    length: int  # tokens before padding
    # bool [bucket]: True where an answer may start / end (a word's first / last piece). None: any context token.
    can_start: np.ndarray | None = None
    can_end: np.ndarray | None = None
    # float32 [bucket]: 0 where can_start / can_end holds, -inf elsewhere, made once here and added to the logits
    # when decoding, which runs after every model call (on 300 floats an add took 0.6 us, a `where` 2.5 us).
    start_bias: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)
    end_bias: np.ndarray | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "start_bias", _bias(self.can_start))
        object.__setattr__(self, "end_bias", _bias(self.can_end))

    @property
    def bucket(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True)
class Answer:
    text: str
    score: float
    start: int
    end: int

    def to_dict(self) -> dict[str, object]:
        return {"answer": self.text, "score": self.score, "start": self.start, "end": self.end}


class QAProcessor:
    """Tokenize to the smallest bucket that fits; split long contexts into overlapping windows (doc stride)."""

    def __init__(
        self, tokenizer: Tokenizer, buckets: list[int], doc_stride: int, max_answer_tokens: int, *, owned: bool = False
    ) -> None:
        """`owned`: the tokenizer is this processor's to change (from_file's); otherwise it works on a copy."""
        if not buckets or sorted(buckets) != buckets:
            raise ValueError("buckets must be a non-empty increasing list")
        self.buckets = list(buckets)
        self.max_length = self.buckets[-1]
        self.max_answer_tokens = max_answer_tokens
        # One tokenizer for the question's length and the windows, its truncation set under the lock for each: a
        # copy costs what reading tokenizer.json does (~17 ms of a ~0.65 s cold start for MiniLM's).
        self._tokenizer = tokenizer if owned else Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_padding()
        self._special_pair = self._tokenizer.num_special_tokens_to_add(is_pair=True)
        self._doc_stride = doc_stride
        self._pad_id = _pad_id(self._tokenizer)
        # Truncation settings live on the tokenizer object: one featurize() at a time may change them.
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str, buckets: list[int], doc_stride: int, max_answer_tokens: int) -> QAProcessor:
        return cls(Tokenizer.from_file(path), buckets, doc_stride, max_answer_tokens, owned=True)

    def featurize(self, question: str, context: str) -> list[Feature]:
        with self._lock:
            self._tokenizer.no_truncation()
            question_tokens = len(self._tokenizer.encode(question, add_special_tokens=False).ids)
            room = self.max_length - self._special_pair - question_tokens
            if room < MIN_CONTEXT_TOKENS:
                raise InputTooLong(
                    f"question is too long: {question_tokens} tokens leave {max(room, 0)} for the context "
                    f"(max sequence {self.max_length})"
                )
            # The stride must stay below the context window, or the tokenizer would never advance.
            stride = min(self._doc_stride, room // 2)
            self._tokenizer.enable_truncation(
                max_length=self.max_length, stride=stride, strategy="only_second", direction="right"
            )
            encoding = self._tokenizer.encode(question, context)
        windows = [encoding, *encoding.overflowing]
        # Each Encoding property builds a new list: read each once.
        tokens = [(w.sequence_ids, w.word_ids, w.offsets) for w in windows]
        bounds = answer_bounds(tokens, context)
        return [
            self._feature(window, sequence_ids, offsets, can_start, can_end)
            for window, (sequence_ids, _, offsets), (can_start, can_end) in zip(windows, tokens, bounds, strict=True)
        ]

    def filler_feature(self, bucket: int) -> Feature:
        """A feature filling `bucket` with real vocabulary ids: exercises the graph at its full shape."""
        window = self.featurize("what warms the model up?", " ".join(["warm"] * (2 * self.max_length)))[0]
        repeats = -(-bucket // window.length)
        ids = np.tile(window.input_ids[: window.length], repeats)[:bucket]
        types = np.tile(window.token_type_ids[: window.length], repeats)[:bucket]
        context = np.tile(window.context_mask[: window.length], repeats)[:bucket]
        offsets = tuple((window.offsets * repeats)[:bucket])
        assert window.can_start is not None and window.can_end is not None  # featurize() always sets them
        can_start = np.tile(window.can_start[: window.length], repeats)[:bucket]
        can_end = np.tile(window.can_end[: window.length], repeats)[:bucket]
        return Feature(ids, np.ones(bucket, dtype=np.int64), types, context, offsets, bucket, can_start, can_end)

    def _feature(
        self,
        window: Encoding,
        sequence_ids: list[int | None],
        offsets: list[tuple[int, int]],
        can_start: np.ndarray,
        can_end: np.ndarray,
    ) -> Feature:
        length = len(window.ids)
        bucket = pick_bucket(length, self.buckets)
        ids, mask, types = padded(window.ids, window.type_ids, bucket, self._pad_id)
        context_mask = np.zeros(bucket, dtype=bool)
        context_mask[:length] = [sid == 1 for sid in sequence_ids]
        starts = np.zeros(bucket, dtype=bool)
        starts[:length] = can_start
        ends = np.zeros(bucket, dtype=bool)
        ends[:length] = can_end
        return Feature(ids, mask, types, context_mask, tuple(offsets), length, starts, ends)

    def decode(self, context: str, features: list[Feature], logits: list[tuple[np.ndarray, np.ndarray]]) -> Answer:
        """Best span over all windows: start/end probabilities within each window's context tokens."""
        best: tuple[float, int, int] | None = None
        for feature, (start_logits, end_logits) in zip(features, logits, strict=True):
            span = _best_span(
                start_logits,
                end_logits,
                feature.context_mask,
                self.max_answer_tokens,
                feature.start_bias,
                feature.end_bias,
            )
            if span is None:
                continue
            score, i, j = span
            char_start, char_end = feature.offsets[i][0], feature.offsets[j][1]
            if best is None or score > best[0]:
                best = (score, char_start, char_end)
        if best is None:
            return Answer("", 0.0, 0, 0)
        score, char_start, char_end = best
        return Answer(context[char_start:char_end], float(score), int(char_start), int(char_end))


def best_span(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    max_answer_tokens: int,
    can_start: np.ndarray | None = None,
    can_end: np.ndarray | None = None,
) -> tuple[float, int, int] | None:
    """(probability, start token, end token) maximising p_start * p_end with start <= end < start + max, where
    p_start and p_end are softmaxes over the context tokens; only tokens marked in `can_start` / `can_end` (when
    given) may start / end the span. None when no context token (or no allowed pair) is left.

    With the restriction, the softmaxes run over the allowed tokens only: the model's probability given that a span
    starts and ends on word boundaries. So a window whose logits point inside a word is not outscored by an
    unrelated window for that reason alone, and scores are unchanged wherever every token is allowed."""
    return _best_span(start_logits, end_logits, context_mask, max_answer_tokens, _bias(can_start), _bias(can_end))


def _best_span(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_mask: np.ndarray,
    max_answer_tokens: int,
    start_bias: np.ndarray | None,
    end_bias: np.ndarray | None,
) -> tuple[float, int, int] | None:
    """best_span with the allowed starts/ends as additive biases (0 or -inf).

    The product is largest where start_logit + end_logit is, so the search runs on logits and the two softmaxes
    are evaluated at the winning pair only. Few NumPy calls on purpose: this runs right after a model call, when
    caches are cold and each distinct NumPy call costs ~10 us instead of ~1 us. The word restriction adds one
    same-dtype add per side (~0.6 us each warm, on 300 floats, against ~2.5 us for a `where`).
    """
    positions = np.flatnonzero(context_mask)
    n = positions.size
    if n == 0:
        return None
    # Context tokens are contiguous in every pair template, so windows over their order are windows over tokens.
    first = int(positions[0])
    contiguous = int(positions[-1]) - first + 1 == n
    if contiguous:
        starts, ends = start_logits[first : first + n], end_logits[first : first + n]
    else:
        starts, ends = start_logits[positions], end_logits[positions]
    search_starts, search_ends = starts, ends
    if start_bias is not None:
        search_starts = starts + (start_bias[first : first + n] if contiguous else start_bias[positions])
    if end_bias is not None:
        search_ends = ends + (end_bias[first : first + n] if contiguous else end_bias[positions])
    width = min(max_answer_tokens, n)
    # For each start i, the best end lies in [i, i + width): a sliding-window max over the end logits, as a
    # strided view (row i = ends[i : i + width], padded with -inf past the last token).
    pad = _NEG_INF[: width - 1] if width <= _NEG_INF.size else np.full(width - 1, -np.inf, dtype=np.float32)
    padded = np.concatenate((search_ends, pad))
    step = padded.strides[0]
    windows = np.ndarray((n, width), padded.dtype, buffer=padded, strides=(step, step))
    totals = search_starts + windows.max(axis=1)
    i = int(totals.argmax())
    if totals[i] == -np.inf:  # every start is forbidden, or has no allowed end within reach
        return None
    j = i + int(windows[i].argmax())
    probability = math.exp(float(starts[i]) - _logsumexp(search_starts) + float(ends[j]) - _logsumexp(search_ends))
    return probability, int(positions[i]), int(positions[j])


def _bias(allowed: np.ndarray | None) -> np.ndarray | None:
    """0.0 where `allowed`, -inf elsewhere (float32), or None for no restriction."""
    if allowed is None:
        return None
    return np.where(allowed, np.float32(0.0), np.float32(-np.inf))


def _logsumexp(x: np.ndarray) -> float:
    top = float(x.max())
    return top + math.log(float(np.exp(x - top).sum()))


WindowTokens = tuple[list[int | None], list[int | None], list[tuple[int, int]]]  # sequence ids, word ids, offsets


def answer_bounds(windows: list[WindowTokens], context: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per window, bool arrays over its tokens: may an answer start / end there?

    An answer starts at the first piece of a word and ends at the last piece of one, words being what the tokenizer's
    pre-tokenizer made (so never at a WordPiece continuation: "£45" is "£" + "##45", and "45" alone is no answer);
    and it never starts or ends between two letters or digits of the context (a tokenizer that splits "abc123"
    does not make "123" a word of its own). Only context tokens may start or end an answer.

    Within a window a token begins (ends) its word when the previous (next) token's word differs; word ids count
    through the whole context, so a window's first and last words are looked up in the neighbouring windows. NumPy
    per window, Python only at window edges. Added to the tokenizer's own time (best of 40 x 50 runs on the 2-core
    VM): 23 tokens 51 us + 16 us (a Python loop over the tokens: + 8 us); the rainforest paragraph, 244 tokens,
    456 us + 54 us (loop: + 97 us); six times that paragraph, 2104 tokens in 6 windows, 3646 us + 427 us (loop: +898).
    """
    word_chars = np.zeros(len(context) + 2, dtype=bool)
    word_chars[1:-1] = _word_chars(context)
    joined = word_chars[:-1] & word_chars[1:]  # joined[k]: characters k-1 and k are both letters or digits
    views = [_context_view(*window) for window in windows]
    # Where the word at a window's first context token began, and where the word at its last one ends: the token
    # before (after) it is in the previous (next) window, which windows overlap or adjoin.
    began: list[int] = [0] * len(views)
    for k, view in enumerate(views):
        if view is None:
            continue
        began[k] = int(view.starts[0])
        previous = views[k - 1] if k > 0 else None
        word = view.words[0]
        if word is not None and previous is not None and word in previous.words:
            index = previous.words.index(word)
            began[k] = began[k - 1] if index == 0 else int(previous.starts[index])
    ended: list[int] = [0] * len(views)
    for k in range(len(views) - 1, -1, -1):
        view = views[k]
        if view is None:
            continue
        ended[k] = int(view.ends[-1])
        following = views[k + 1] if k + 1 < len(views) else None
        word = view.words[-1]
        if word is not None and following is not None and word in following.words:
            index = len(following.words) - 1 - following.words[::-1].index(word)
            ended[k] = ended[k + 1] if index == len(following.words) - 1 else int(following.ends[index])
    bounds = []
    for k, ((sequence_ids, _, _), view) in enumerate(zip(windows, views, strict=True)):
        can_start = np.zeros(len(sequence_ids), dtype=bool)
        can_end = np.zeros(len(sequence_ids), dtype=bool)
        if view is not None:
            change = view.word_array[1:] != view.word_array[:-1]  # nan (a token outside any word) differs from all
            first_piece = np.empty(change.size + 1, dtype=bool)
            first_piece[1:] = change
            first_piece[0] = began[k] == view.starts[0]
            last_piece = np.empty(change.size + 1, dtype=bool)
            last_piece[:-1] = change
            last_piece[-1] = ended[k] == view.ends[-1]
            can_start[view.first : view.stop] = first_piece & ~joined[view.starts]
            can_end[view.first : view.stop] = last_piece & ~joined[view.ends]
        bounds.append((can_start, can_end))
    return bounds


@dataclass(frozen=True)
class _ContextView:
    """A window's context tokens [first, stop) (contiguous in every pair template): word ids, char starts/ends."""

    first: int
    stop: int
    words: list[int | None]
    word_array: np.ndarray  # float64, nan for None
    starts: np.ndarray
    ends: np.ndarray


def _context_view(
    sequence_ids: list[int | None], word_ids: list[int | None], offsets: list[tuple[int, int]]
) -> _ContextView | None:
    if 1 not in sequence_ids:
        return None
    first = sequence_ids.index(1)
    stop = first + sequence_ids.count(1)
    if sequence_ids[stop - 1] != 1:
        raise ValueError("the context tokens of a window are not contiguous: not a question/context pair template")
    words = word_ids[first:stop]
    count = stop - first
    spans = np.fromiter(itertools.chain.from_iterable(offsets[first:stop]), dtype=np.int64, count=2 * count)
    return _ContextView(first, stop, words, np.array(words, dtype=np.float64), spans[0::2], spans[1::2])


def _word_chars(text: str) -> np.ndarray:
    """Per character: a letter or digit (CJK ideographs excepted: each is a word of its own)."""
    if text.isascii():
        return _ASCII_WORD[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    wide = codes >= 128
    chars = _ASCII_WORD[np.where(wide, 0, codes)]
    for index in np.flatnonzero(wide).tolist():  # Python only for the non-ASCII characters
        chars[index] = _word_char(text[index])
    return chars


def _word_char(char: str) -> bool:
    return char.isalnum() and not _is_cjk(ord(char))


_ASCII_WORD = np.array([chr(code).isalnum() for code in range(128)], dtype=bool)
# The CJK Unified Ideographs blocks BERT's BasicTokenizer splits into one word per character.
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(code: int) -> bool:
    return code >= 0x3400 and any(low <= code <= high for low, high in _CJK)


__all__ = ["Answer", "Feature", "InputTooLong", "QAProcessor", "answer_bounds", "best_span", "pick_bucket"]
