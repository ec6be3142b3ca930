"""Extractive QA text logic: question/context -> bucketed model features, and logits -> an answer span.

Pure functions over a `tokenizers.Tokenizer`; no model, no HTTP.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np
from tokenizers import Encoding, Tokenizer

# Smallest window of context tokens worth sending next to the question.
MIN_CONTEXT_TOKENS = 8


class InputTooLong(ValueError):
    """The question alone does not fit the largest sequence bucket."""


@dataclass(frozen=True)
class Feature:
    """One model input window: the question plus a slice of the context, padded to its bucket."""

    input_ids: np.ndarray  # int64 [bucket]
    attention_mask: np.ndarray  # int64 [bucket]
    token_type_ids: np.ndarray  # int64 [bucket]
    context_mask: np.ndarray  # bool [bucket]: True where the token belongs to the context
    offsets: tuple[tuple[int, int], ...]  # char span in the context of each unpadded token
    length: int  # tokens before padding

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


def pick_bucket(length: int, buckets: list[int]) -> int:
    """Smallest bucket that holds `length` tokens (callers split longer inputs first)."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ValueError(f"{length} tokens exceed the largest bucket {buckets[-1]}")


class QAProcessor:
    """Tokenize to the smallest bucket that fits; split long contexts into overlapping windows (doc stride)."""

    def __init__(self, tokenizer: Tokenizer, buckets: list[int], doc_stride: int, max_answer_tokens: int) -> None:
        if not buckets or sorted(buckets) != buckets:
            raise ValueError("buckets must be a non-empty increasing list")
        self.buckets = list(buckets)
        self.max_length = self.buckets[-1]
        self.max_answer_tokens = max_answer_tokens
        self._question_tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._question_tokenizer.no_truncation()
        self._question_tokenizer.no_padding()
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_padding()
        self._special_pair = self._tokenizer.num_special_tokens_to_add(is_pair=True)
        self._doc_stride = doc_stride
        self._pad_id = _pad_id(self._tokenizer)
        # Truncation settings live on the tokenizer object: one featurize() at a time may change them.
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str, buckets: list[int], doc_stride: int, max_answer_tokens: int) -> QAProcessor:
        return cls(Tokenizer.from_file(path), buckets, doc_stride, max_answer_tokens)

    def featurize(self, question: str, context: str) -> list[Feature]:
        question_tokens = len(self._question_tokenizer.encode(question, add_special_tokens=False).ids)
        room = self.max_length - self._special_pair - question_tokens
        if room < MIN_CONTEXT_TOKENS:
            raise InputTooLong(
                f"question is too long: {question_tokens} tokens leave {max(room, 0)} for the context "
                f"(max sequence {self.max_length})"
            )
        # The stride must stay below the context window, or the tokenizer would never advance.
        stride = min(self._doc_stride, room // 2)
        with self._lock:
            self._tokenizer.enable_truncation(
                max_length=self.max_length, stride=stride, strategy="only_second", direction="right"
            )
            encoding = self._tokenizer.encode(question, context)
        return [self._feature(window) for window in [encoding, *encoding.overflowing]]

    def filler_feature(self, bucket: int) -> Feature:
        """A feature filling `bucket` with real vocabulary ids: exercises the graph at its full shape."""
        window = self.featurize("what warms the model up?", " ".join(["warm"] * (2 * self.max_length)))[0]
        repeats = -(-bucket // window.length)
        ids = np.tile(window.input_ids[: window.length], repeats)[:bucket]
        types = np.tile(window.token_type_ids[: window.length], repeats)[:bucket]
        context = np.tile(window.context_mask[: window.length], repeats)[:bucket]
        offsets = tuple((window.offsets * repeats)[:bucket])
        return Feature(ids, np.ones(bucket, dtype=np.int64), types, context, offsets, bucket)

    def _feature(self, window: Encoding) -> Feature:
        length = len(window.ids)
        bucket = pick_bucket(length, self.buckets)
        ids = np.full(bucket, self._pad_id, dtype=np.int64)
        ids[:length] = window.ids
        mask = np.zeros(bucket, dtype=np.int64)
        mask[:length] = 1
        types = np.zeros(bucket, dtype=np.int64)
        types[:length] = window.type_ids
        context_mask = np.zeros(bucket, dtype=bool)
        context_mask[:length] = [sid == 1 for sid in window.sequence_ids]
        return Feature(ids, mask, types, context_mask, tuple(window.offsets), length)

    def decode(self, context: str, features: list[Feature], logits: list[tuple[np.ndarray, np.ndarray]]) -> Answer:
        """Best span over all windows: start/end probabilities within each window's context tokens."""
        best: tuple[float, int, int] | None = None
        for feature, (start_logits, end_logits) in zip(features, logits, strict=True):
            span = best_span(start_logits, end_logits, feature.context_mask, self.max_answer_tokens)
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
    start_logits: np.ndarray, end_logits: np.ndarray, context_mask: np.ndarray, max_answer_tokens: int
) -> tuple[float, int, int] | None:
    """(probability, start token, end token) maximising p_start * p_end with start <= end < start + max, where
    p_start and p_end are softmaxes over the context tokens.

    The product is largest where start_logit + end_logit is, so the search runs on logits and the two softmaxes
    are evaluated at the winning pair only. Few NumPy calls on purpose: this runs right after a model call, when
    caches are cold and each distinct NumPy call costs ~10 us instead of ~1 us.
    """
    positions = np.flatnonzero(context_mask)
    n = positions.size
    if n == 0:
        return None
    # Context tokens are contiguous in every pair template, so windows over their order are windows over tokens.
    first = int(positions[0])
    if int(positions[-1]) - first + 1 == n:
        starts, ends = start_logits[first : first + n], end_logits[first : first + n]
    else:
        starts, ends = start_logits[positions], end_logits[positions]
    width = min(max_answer_tokens, n)
    # For each start i, the best end lies in [i, i + width): a sliding-window max over the end logits, as a
    # strided view (row i = ends[i : i + width], padded with -inf past the last token).
    padded = np.concatenate((ends, np.full(width - 1, -np.inf, dtype=ends.dtype)))
    step = padded.strides[0]
    windows = np.ndarray((n, width), padded.dtype, buffer=padded, strides=(step, step))
    i = int((starts + windows.max(axis=1)).argmax())
    j = i + int(windows[i].argmax())
    probability = math.exp(float(starts[i]) - _logsumexp(starts) + float(ends[j]) - _logsumexp(ends))
    return probability, int(positions[i]), int(positions[j])


def _logsumexp(x: np.ndarray) -> float:
    top = float(x.max())
    return top + math.log(float(np.exp(x - top).sum()))


def _pad_id(tokenizer: Tokenizer) -> int:
    for token in ("[PAD]", "<pad>", "<PAD>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return int(token_id)
    return 0
