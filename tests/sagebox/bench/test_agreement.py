"""How the token-for-token check judges a difference: only where transformers' two best logits nearly tie."""

from __future__ import annotations

from sagebox.bench.agreement import NEAR_TIE, PROMPTS, _compare


def test_same_near_tie_and_differs() -> None:
    margins = [0.5, NEAR_TIE / 10, 0.2]
    assert _compare([1, 2, 3], [1, 2, 3], margins) == "same"
    assert _compare([1, 9, 7], [1, 2, 3], margins) == "near-tie"  # the first difference decides: later ones follow it
    assert _compare([1, 2, 9], [1, 2, 3], margins) == "differs"
    assert _compare([1, 2], [1, 2, 3], margins) == "differs"  # stopped early
    assert len(PROMPTS) == 20 and len(set(PROMPTS)) == 20
