"""The decoder's INT8 linear layer: close to FP32, each token quantized by its own range whatever shares the step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from container.generation.linear import DenseLinear, Int8Linear, make_linear, quantize_rows


def _inputs(seed: int, rows: int, features: int) -> torch.Tensor:
    return torch.randn(rows, features, generator=torch.Generator().manual_seed(seed))


def _relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return float((ours - reference).norm() / reference.norm())


def test_per_row_int8_weights_keep_every_row_within_half_a_step() -> None:
    weight = _inputs(0, 48, 64) * torch.linspace(0.01, 10, 48)[:, None]  # rows of very different magnitudes
    q, scale = quantize_rows(weight)
    assert q.dtype == torch.int8 and scale.shape == (48,)
    assert int(q.abs().amax(dim=1).min()) == 127  # each row's largest magnitude is exactly 127 steps
    assert torch.all((q.float() * scale[:, None] - weight).abs() <= scale[:, None] / 2 + 1e-6)
    again, again_scale = quantize_rows(q.float() * scale[:, None])
    assert torch.equal(again, q)  # an INT8 artifact's dequantized weights pack back to the same integers
    torch.testing.assert_close(again_scale, scale)


@pytest.mark.parametrize("rows", [1, 3, 16])
def test_int8_linear_is_close_to_fp32_with_and_without_bias(rows: int) -> None:
    weight, bias, x = _inputs(1, 96, 64), _inputs(2, 1, 96)[0], _inputs(3, rows, 64)
    for b in (None, bias):
        ours = Int8Linear(weight, b)(x)
        reference = F.linear(x, weight, b)
        assert ours.shape == (rows, 96)
        assert _relative_error(ours, reference) < 0.02


def test_a_token_is_quantized_by_its_own_range_whatever_shares_the_step() -> None:
    """An attention-sink-like row 1,000x larger beside a normal one: the normal row's result is bitwise what it is
    beside another normal row (one range for the whole step would have coarsened it ~1,000x)."""
    layer = Int8Linear(_inputs(4, 32, 64), None)
    row = _inputs(5, 1, 64)
    beside_huge = layer(torch.cat([row, _inputs(6, 1, 64) * 1000]))[0]
    beside_small = layer(torch.cat([_inputs(7, 1, 64) * 0.001, row, _inputs(8, 1, 64)]))[1]
    assert torch.equal(beside_huge, beside_small)
    assert _relative_error(beside_huge, F.linear(row, layer_weight := _inputs(4, 32, 64))[0]) < 0.02
    per_tensor = torch.ops.quantized.linear_dynamic(torch.cat([row, _inputs(6, 1, 64) * 1000]), layer.packed_single)
    assert _relative_error(per_tensor[0], F.linear(row, layer_weight)[0]) > 0.1  # what the pinning avoids


def test_make_linear_names_its_kinds() -> None:
    weight = _inputs(9, 8, 16)
    assert isinstance(make_linear(weight, None, "fp32"), DenseLinear)
    assert isinstance(make_linear(weight, None, "int8"), Int8Linear)
    with pytest.raises(ValueError, match="unknown linear kind 'int4'"):
        make_linear(weight, None, "int4")


@pytest.mark.parametrize(
    ("flags", "levels"),
    [
        (["avx2", "fma"], 63),  # vpmaddubsw: pairs of products saturate an int16
        (["avx2", "avx512f", "avx512bw"], 63),  # AVX-512 without VNNI: the same instruction, wider
        (["avx2", "avx512f", "avx512bw", "avx512_vnni"], 127),  # vpdpbusd sums into int32
        (["avx512_vnni", "amx_tile", "amx_int8"], 127),
    ],
)
def test_weights_take_seven_bits_where_the_cpu_has_no_vnni(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], levels: int
) -> None:
    from container.generation import linear

    monkeypatch.setattr(linear, "cpu_flags", lambda: flags)
    monkeypatch.setenv("SAGEBOX_CPU_KIND", "avx512_vnni")  # a forced kind does not change the instructions that run
    linear.products_saturate.cache_clear()
    try:
        assert linear.products_saturate() is (levels == 63)
        layer = Int8Linear(_inputs(10, 8, 16), None)
        assert layer.weight_levels == levels
        q, _ = quantize_rows(_inputs(10, 8, 16), levels)
        assert int(q.abs().amax()) == levels  # every row's largest weight at the top level, none past it
    finally:
        linear.products_saturate.cache_clear()
