"""Text (or text pairs) into bucketed model windows: truncated at a length, or split into overlapping windows."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

import numpy as np
from tokenizers import Encoding, Tokenizer

from container.tasks.base import InputTooLong, Window


def pick_bucket(length: int, buckets: list[int]) -> int:
    """Smallest bucket that holds `length` tokens (callers cut longer inputs first)."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ValueError(f"{length} tokens exceed the largest bucket {buckets[-1]}")


def pad_id(tokenizer: Tokenizer) -> int:
    for token in ("[PAD]", "<pad>", "<PAD>"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return int(token_id)
    return 0


def padded(ids: list[int], type_ids: list[int], bucket: int, pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """input_ids, attention_mask and token_type_ids of one window, padded to `bucket` tokens."""
    length = len(ids)
    input_ids = np.full(bucket, pad, dtype=np.int64)
    input_ids[:length] = ids
    mask = np.zeros(bucket, dtype=np.int64)
    mask[:length] = 1
    types = np.zeros(bucket, dtype=np.int64)
    types[:length] = type_ids
    return input_ids, mask, types


@dataclass(frozen=True)
class Encoded:
    """The windows of one input; `truncated` when tokens past the last window were dropped."""

    windows: list[Window]
    truncated: bool


class TextEncoder:
    """Tokenize to the smallest bucket that fits, never past `max_length` tokens (the largest bucket at most)."""

    def __init__(
        self, tokenizer: Tokenizer, buckets: list[int], max_length: int, lowercase: bool = False, *, owned: bool = False
    ) -> None:
        """`owned`: the tokenizer is this encoder's to change (from_file's); otherwise it works on a copy."""
        if not buckets or sorted(set(buckets)) != buckets:
            raise ValueError("buckets must be a non-empty increasing list")
        self.buckets = list(buckets)
        self.max_length = min(max_length, self.buckets[-1])
        self.lowercase = lowercase
        # The tokenizer file may carry its own padding and truncation settings: the encoder sets both itself.
        self._tokenizer = tokenizer if owned else Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._pad_id = pad_id(self._tokenizer)
        self._special = {
            "single": self._tokenizer.num_special_tokens_to_add(is_pair=False),
            "pair": self._tokenizer.num_special_tokens_to_add(is_pair=True),
        }
        # Truncation settings live on the tokenizer object: one encode at a time may change them.
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: str, buckets: list[int], max_length: int, lowercase: bool = False) -> TextEncoder:
        return cls(Tokenizer.from_file(path), buckets, max_length, lowercase, owned=True)

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def encode(
        self,
        text: str,
        pair: str | None = None,
        *,
        windows: bool = False,
        stride: int = 0,
        max_length: int | None = None,
    ) -> Encoded:
        """One window cut at `max_length` tokens (default: the encoder's), or with `windows` every window of that
        length, consecutive windows sharing `stride` tokens (of the second text, for a pair)."""
        if self.lowercase:
            text = text.lower()
            pair = pair.lower() if pair is not None else None
        limit = min(max_length or self.max_length, self.max_length)
        special = self._special["pair" if pair is not None else "single"]
        if limit <= special:
            raise InputTooLong(f"{limit} tokens leave no room for text beside {special} special tokens")
        strategy = "only_second" if windows and pair is not None else "longest_first"
        with self._lock:
            if windows:
                room = limit - special
                if pair is not None:
                    self._tokenizer.no_truncation()
                    first = len(self._tokenizer.encode(text, add_special_tokens=False).ids)
                    room -= first
                    if room < 8:
                        raise InputTooLong(
                            f"the first text is too long: {first} tokens leave {max(room, 0)} for the second "
                            f"(max sequence {limit})"
                        )
                stride = max(0, min(stride, room // 2))  # the tokenizer must advance from window to window
            self._tokenizer.enable_truncation(
                max_length=limit, stride=stride if windows else 0, strategy=strategy, direction="right"
            )
            encoding = self._tokenizer.encode(text, pair) if pair is not None else self._tokenizer.encode(text)
        if windows:
            return Encoded([self.window(part) for part in [encoding, *encoding.overflowing]], truncated=False)
        window = self.window(encoding)
        truncated = bool(encoding.overflowing)
        return Encoded([dataclasses.replace(window, truncated=True) if truncated else window], truncated)

    def window(self, encoding: Encoding) -> Window:
        length = len(encoding.ids)
        ids, mask, types = padded(encoding.ids, encoding.type_ids, pick_bucket(length, self.buckets), self._pad_id)
        return Window(
            ids,
            mask,
            types,
            length,
            offsets=tuple(encoding.offsets),
            special=tuple(bool(s) for s in encoding.special_tokens_mask),
            tokens=tuple(encoding.tokens),
            ids=tuple(encoding.ids),
        )

    def filler(self, bucket: int) -> Window:
        """A window filling `bucket` with real vocabulary ids (warm-up: the graph runs at its full shape)."""
        encoded = self._tokenizer.encode(" ".join(["warm"] * bucket))
        base = np.array(encoded.ids, dtype=np.int64)
        ids = np.resize(base, bucket)
        types = np.zeros(bucket, dtype=np.int64)
        return Window(ids, np.ones(bucket, dtype=np.int64), types, bucket)
