"""Greedy agreement between two decoders: how often INT8 picks FP32's token, position by position.

Both generate the same number of tokens greedily from the same prompts (EOS ignored), and every position of every
prompt is compared: the share of equal positions, the prompts whose tokens are all equal, and where each prompt first
differs. A position after the first difference is compared too, though its context differs: a decoder that goes back
to FP32's wording a token later still agrees there, one that wanders off does not. Pure: token lists in, figures out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    positions: int  # token positions compared, over all prompts
    equal: int  # positions where INT8's token is FP32's
    # Per prompt: the index of its first differing token, 0-based (= the tokens equal before it); a prompt whose
    # tokens are all equal counts its length (no difference within it).
    first_divergence: tuple[int, ...]
    lengths: tuple[int, ...]  # tokens generated per prompt

    @property
    def share(self) -> float:
        return self.equal / self.positions if self.positions else 1.0

    @property
    def prompts(self) -> int:
        return len(self.lengths)

    @property
    def prompts_equal(self) -> int:
        return sum(first == length for first, length in zip(self.first_divergence, self.lengths, strict=True))

    @property
    def mean_first_divergence(self) -> float:
        """The mean index of the first differing token, a fully equal prompt counting its length."""
        return sum(self.first_divergence) / len(self.first_divergence) if self.first_divergence else 0.0

    def summary(self) -> dict[str, object]:
        return {
            "share": round(self.share, 6),
            "positions": self.positions,
            "equal": self.equal,
            "prompts": self.prompts,
            "prompts_equal": self.prompts_equal,
            "mean_first_divergence": round(self.mean_first_divergence, 4),
            "first_divergence": list(self.first_divergence),
            "lengths": list(self.lengths),
        }

    @classmethod
    def from_summary(cls, data: Mapping[str, object]) -> Agreement:
        def ints(key: str) -> tuple[int, ...]:
            values = data[key]
            assert isinstance(values, list)
            return tuple(int(v) for v in values)

        positions, equal = data["positions"], data["equal"]
        assert isinstance(positions, int) and isinstance(equal, int)
        return cls(positions, equal, ints("first_divergence"), ints("lengths"))


def first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    """The index of the first position where `a` and `b` differ; their common length when none does."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))


def agreement(fp32: Sequence[Sequence[int]], int8: Sequence[Sequence[int]]) -> Agreement:
    """INT8's greedy tokens against FP32's, prompt by prompt (the same prompts, the same number of tokens each)."""
    if len(fp32) != len(int8):
        raise ValueError(f"FP32 generated for {len(fp32)} prompts, INT8 for {len(int8)}")
    lengths = tuple(len(tokens) for tokens in fp32)
    if lengths != tuple(len(tokens) for tokens in int8):
        raise ValueError("FP32 and INT8 generated different numbers of tokens for a prompt")
    equal = sum(x == y for a, b in zip(fp32, int8, strict=True) for x, y in zip(a, b, strict=True))
    divergence = tuple(first_difference(a, b) for a, b in zip(fp32, int8, strict=True))
    return Agreement(sum(lengths), equal, divergence, lengths)
