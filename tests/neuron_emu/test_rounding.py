"""Auto-cast rounding matches round-to-nearest-even in each target format (values worked out by hand)."""

from __future__ import annotations

import math

import pytest
import torch

from neuron_emu.rounding import round_to


def values(*xs: float) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float32)


@pytest.mark.parametrize(
    ("kind", "inputs", "expected"),
    [
        # bf16 keeps 7 mantissa bits: ulp(1) = 2^-7; halfway cases go to the even neighbour.
        ("bf16", (1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8 + 2**-12)), (1.0, 1 + 2**-6, -(1 + 2**-7))),
        # fp16 keeps 10 bits and overflows above 65504.
        ("fp16", (1 + 2**-11, 65519.0, 65520.0, 2**-25), (1.0, 65504.0, math.inf, 0.0)),
        # tf32 keeps 10 bits with fp32's exponent range: no overflow at 65520.
        (
            "tf32",
            (1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-11 + 2**-20, 65520.0),
            (1.0, 1 + 2**-9, 1 + 2**-10, 65536.0),
        ),
        # fp8 e4m3 keeps 3 bits and saturates at 448.
        ("fp8_e4m3", (1.0625, 0.3, 1000.0, -1000.0), (1.0, 0.3125, 448.0, -448.0)),
    ],
)
def test_round_to_nearest_even(kind: str, inputs: tuple[float, ...], expected: tuple[float, ...]) -> None:
    assert round_to(values(*inputs), kind).tolist() == list(expected)


@pytest.mark.parametrize("kind", ["bf16", "fp16", "tf32", "fp8_e4m3"])
def test_special_values_and_idempotence(kind: str) -> None:
    x = values(0.0, -0.0, math.inf, -math.inf, math.nan)
    out = round_to(x, kind)
    assert out[:2].tolist() == [0.0, -0.0]
    assert torch.isnan(out[4])
    if kind != "fp8_e4m3":
        assert out[2:4].tolist() == [math.inf, -math.inf]
    y = torch.randn(1000) * 10
    once = round_to(y, kind)
    assert torch.equal(round_to(once, kind), once)


def test_non_fp32_tensors_are_left_alone() -> None:
    x = torch.tensor([1 + 2**-9], dtype=torch.float64)
    assert round_to(x, "bf16") is x
