"""A plan's NeuronCore rows: per Neuron instance type and tensor-parallel degree, whether the model fits and why
not, its time to first token, ms per token, tokens/s at batch 1 and at the largest batch that fits, and $ per million
generated tokens when the caller passes prices (neuron_emu holds no prices)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from neuron_emu.hardware import GIB, price_for, tensor_parallel_degrees
from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import Constants, dtype_bytes, load_constants
from neuron_emu.llm.cost.cores import Hardware, neuron_hardware
from neuron_emu.llm.cost.sizing import core_fit, largest_batch, shard, why_not_fit
from neuron_emu.llm.cost.timing import check_sequence, generate, split_request, usd_per_m_tokens


@dataclass(frozen=True)
class NeuronRow:
    instance_type: str
    tp: int
    replicas: int
    fits: bool
    reason: str  # why not, when it does not fit or NxD refuses the degree; "" otherwise
    padded: bool
    hbm_gib_per_core: float
    gib_per_core: float | None  # needed at batch 1: weights + KV cache + reserve
    ttft_ms: float | None = None
    ms_per_token: float | None = None
    tokens_per_s_b1: float | None = None  # all replicas
    max_batch: int | None = None
    tokens_per_s_max_batch: float | None = None  # all replicas
    usd_per_hour: float | None = None
    usd_per_m_tokens_b1: float | None = None
    usd_per_m_tokens_max_batch: float | None = None


def neuron_row(
    config: DecoderConfig,
    hw: Hardware,
    tp: int,
    *,
    dtype: str,
    sequence: int,
    constants: Constants,
    prices: Mapping[str, float] | None = None,
    pad_heads: bool = False,
) -> NeuronRow:
    """One instance type at one degree: fit, then (if it fits) the projections at batch 1 and the largest batch."""
    s = shard(config, tp, dtype, pad_heads=pad_heads)
    replicas = hw.cores // tp
    price = price_for(prices, hw.instance_type)
    row = NeuronRow(
        instance_type=hw.instance_type,
        tp=tp,
        replicas=replicas,
        fits=False,
        reason=s.problem or "",
        padded=s.padded,
        hbm_gib_per_core=hw.hbm_bytes_per_core / GIB,
        gib_per_core=None,
        usd_per_hour=price,
    )
    if s.problem is not None and not s.padded:
        return row
    need = core_fit(s, hw, 1, sequence, constants)
    if not need.fits:
        reason = why_not_fit(config, s, hw, sequence, dtype, constants)
        return replace(row, reason=reason, gib_per_core=need.needed_bytes / GIB)
    prompt, output = split_request(sequence)
    one = generate(s, hw, dtype, 1, prompt, output, constants)
    top = largest_batch(s, hw, sequence, constants)
    many = generate(s, hw, dtype, top, prompt, output, constants)
    rate_b1, rate_top = replicas * one.tokens_per_s(), replicas * many.tokens_per_s()
    return replace(
        row,
        fits=True,
        reason=f"padded: {s.problem}" if s.padded else "",
        gib_per_core=need.needed_bytes / GIB,
        ttft_ms=one.ttft_s * 1e3,
        ms_per_token=one.step_s * 1e3,
        tokens_per_s_b1=rate_b1,
        max_batch=top,
        tokens_per_s_max_batch=rate_top,
        usd_per_m_tokens_b1=usd_per_m_tokens(price, rate_b1),
        usd_per_m_tokens_max_batch=usd_per_m_tokens(price, rate_top),
    )


def neuron_plan(
    config: DecoderConfig,
    *,
    dtype: str = "bf16",
    sequence: int,
    constants: Constants | None = None,
    prices: Mapping[str, float] | None = None,
    pad_heads: bool = False,
    instances: Sequence[str] | None = None,
) -> list[NeuronRow]:
    """Every Neuron instance type (or those named) x every degree its family allows that fits its cores."""
    dtype_bytes(dtype)
    check_sequence(config, sequence)
    c = constants or load_constants()
    rows: list[NeuronRow] = []
    for name, hw in neuron_hardware().items():
        if instances is not None and name not in instances:
            continue
        for tp in tensor_parallel_degrees(hw.family):
            if tp <= hw.cores:
                rows.append(
                    neuron_row(
                        config, hw, tp, dtype=dtype, sequence=sequence, constants=c, prices=prices, pad_heads=pad_heads
                    )
                )
    return rows
