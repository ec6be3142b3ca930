"""TextEncoder: bucketed windows, truncation at the maximum, overlapping windows, pairs."""

from __future__ import annotations

import numpy as np
import pytest

from container.tasks.base import InputTooLong
from container.tasks.text import TextEncoder
from tests.conftest import minilm_tokenizer_path

BUCKETS = [16, 32, 64]


def encoder(max_length: int = 64, lowercase: bool = False) -> TextEncoder:
    return TextEncoder.from_file(str(minilm_tokenizer_path()), BUCKETS, max_length, lowercase)


def test_a_short_text_fills_the_smallest_bucket_that_holds_it() -> None:
    encoded = encoder().encode("The Amazon rainforest is large.")
    [window] = encoded.windows
    assert not encoded.truncated and not window.truncated
    assert window.bucket == 16 and window.length == 8  # [CLS] 6 words+punct [SEP]
    assert window.attention_mask.tolist() == [1] * 8 + [0] * 8
    assert window.special[0] and window.special[window.length - 1] and not any(window.special[1:-1])
    assert window.tokens[1] == "the" and window.offsets[1] == (0, 3)


def test_a_long_text_is_cut_at_the_maximum_and_says_so() -> None:
    text = " ".join(f"word{i}" for i in range(100))
    encoded = encoder(max_length=32).encode(text)
    [window] = encoded.windows
    assert encoded.truncated and window.truncated
    assert window.length == 32 and window.bucket == 32


def test_windows_cover_a_long_text_and_overlap_by_the_stride() -> None:
    text = " ".join(["alpha beta gamma delta"] * 30)  # 120 word pieces
    windows = encoder(max_length=32).encode(text, windows=True, stride=8).windows
    assert len(windows) > 3 and all(not w.truncated for w in windows)
    first, second = windows[0], windows[1]
    # the second window starts with the last 8 content tokens of the first
    assert first.offsets[first.length - 2 - 7 : first.length - 1] == second.offsets[1:9]
    covered = {o for w in windows for o, s in zip(w.offsets, w.special, strict=True) if not s}
    assert max(end for _, end in covered) == len(text)


def test_pairs_truncate_longest_first_and_window_the_second_text() -> None:
    enc = encoder(max_length=32)
    one = enc.encode("short premise", " ".join(["hypothesis"] * 60))
    assert one.truncated and one.windows[0].length == 32
    assert set(one.windows[0].token_type_ids[:32].tolist()) == {0, 1}
    several = enc.encode("short premise", " ".join(["hypothesis"] * 60), windows=True, stride=4)
    assert len(several.windows) > 1
    with pytest.raises(InputTooLong, match="first text is too long"):
        enc.encode(" ".join(["premise"] * 40), "second", windows=True)


def test_lowercase_and_baked_in_tokenizer_settings_do_not_leak() -> None:
    # The MiniLM tokenizer.json pads and truncates to 128 itself: the encoder pads only to its bucket.
    window = encoder(lowercase=True).encode("HELLO World").windows[0]
    assert window.bucket == 16 and window.tokens[1:3] == ("hello", "world")


def test_filler_uses_real_ids_at_full_shape() -> None:
    window = encoder().filler(32)
    assert window.bucket == 32 and window.attention_mask.sum() == 32
    assert np.all(window.input_ids > 0)
