"""The published figures behind neuron_emu.llm.cost: fitting its two constants to two of them, and checking the rest.

neuron_emu/data/llm_cost.json lists AWS's published decoder figures (with the file, commit and Neuron release each
row comes from) and this project's own CPU measurement. Rows marked "fit" determine the fitted constants; every
"held_out" row is projected with them and compared ("expect" says whether the model is claimed to come within the
file's tolerance, or is a reported miss with its reason); "excluded" rows are kept with the reason they are not
comparable. The configs of the models are passed in by the caller (neuron_emu reads no other package's files).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import Constants, cost_data
from neuron_emu.llm.cost.cores import hardware
from neuron_emu.llm.cost.cpu import cpu_load, cpu_step_s, fit_cpu
from neuron_emu.llm.cost.sizing import shard
from neuron_emu.llm.cost.timing import Generation, generate

Configs = Mapping[str, DecoderConfig]  # model name as the data file spells it -> its shape


@dataclass(frozen=True)
class Published:
    id: str
    model: str
    release: str
    source: str
    instance_type: str
    tp: int
    batch: int
    input_tokens: int
    output_tokens: int
    tokens_per_s: float
    counts: str  # "output" (generated tokens only) or "input+output"
    dtype: str
    use: str  # "fit", "held_out" or "excluded"
    expect: str  # for held-out rows: "within" (the tolerance) or "miss" (reported, with its reason in `note`)
    note: str = ""
    latency_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None


@dataclass(frozen=True)
class Measured:
    """One of this project's own CPU-engine measurements (docs/generation.md)."""

    id: str
    model: str
    vcpus: int
    batch: int
    context: int
    output_tokens: int
    tokens_per_s: float
    use: str
    expect: str
    note: str = ""


def _published(raw: Mapping[str, Any]) -> Published:
    return Published(**{key: raw[key] for key in Published.__dataclass_fields__ if key in raw})


def published_rows(data: Mapping[str, Any] | None = None) -> list[Published]:
    return [_published(r) for r in (data or cost_data())["published"]]


def measured_rows(data: Mapping[str, Any] | None = None) -> list[Measured]:
    return [
        Measured(**{k: r[k] for k in Measured.__dataclass_fields__ if k in r})
        for r in (data or cost_data())["measured"]
    ]


def tolerance(data: Mapping[str, Any] | None = None) -> float:
    return float((data or cost_data())["tolerance"])


def project(row: Published, config: DecoderConfig, c: Constants) -> Generation:
    """The row's run as the model projects it: transformers-neuronx pads heads a degree does not divide."""
    s = shard(config, row.tp, row.dtype, pad_heads=True)
    return generate(s, hardware(row.instance_type), row.dtype, row.batch, row.input_tokens, row.output_tokens, c)


def projected_tokens_per_s(row: Published, config: DecoderConfig, c: Constants) -> float:
    return project(row, config, c).tokens_per_s(row.counts)


def _bisect(f: Callable[[float], float], lo: float, hi: float, what: str) -> float:
    """The root of an increasing `f` on [lo, hi]."""
    f_lo, f_hi = f(lo), f(hi)
    if f_lo > 0 or f_hi < 0:
        raise ValueError(f"no {what} in [{lo}, {hi}] explains the figures")
    for _ in range(100):
        mid = (lo + hi) / 2
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fit_neuron(rows: tuple[Published, Published], configs: Configs, base: Constants) -> Constants:
    """HBM efficiency and collective hop latency such that both rows' projected tokens/s equal the published ones.

    The two rows must differ in tensor-parallel degree: the hop latency scales with 2 (tp - 1) hops per all-reduce
    and the bandwidth term with weights / tp, so two degrees separate them. For a hop latency h, the first row fixes
    the efficiency e(h) (tokens/s rise with e); the second row's tokens/s then fall as h grows, so h is bisected too.
    """
    first, second = rows
    if first.tp == second.tp:
        raise ValueError("the two fitted rows must be at different tensor-parallel degrees")

    def efficiency(hop: float) -> float:
        def gap(e: float) -> float:
            c = base.with_values(hbm_efficiency=e, collective_hop_us=hop)
            return projected_tokens_per_s(first, configs[first.model], c) - first.tokens_per_s

        return _bisect(gap, 1e-3, 1.0, "HBM efficiency")

    def second_gap(hop: float) -> float:
        c = base.with_values(hbm_efficiency=efficiency(hop), collective_hop_us=hop)
        return second.tokens_per_s - projected_tokens_per_s(second, configs[second.model], c)

    hop = _bisect(second_gap, 0.0, 10.0, "hop latency (us)")
    return base.with_values(hbm_efficiency=efficiency(hop), collective_hop_us=hop)


def fit_cpu_constants(data: Mapping[str, Any], configs: Configs, base: Constants) -> Constants:
    fitted = [m for m in measured_rows(data) if m.use == "fit"]
    if len(fitted) != 2 or fitted[0].model != fitted[1].model or fitted[0].vcpus != fitted[1].vcpus:
        raise ValueError("the CPU fit needs two measurements of one model on one machine")
    points = [(m.batch, m.context, m.tokens_per_s) for m in fitted]
    bandwidth, flops = fit_cpu(configs[fitted[0].model], fitted[0].vcpus, points)
    return base.with_values(cpu_bytes_per_s_per_vcpu=bandwidth, cpu_flops_per_s_per_vcpu=flops)


def refit(configs: Configs, base: Constants, data: Mapping[str, Any] | None = None) -> Constants:
    """Every fitted constant again from the rows the data file marks "fit"."""
    data = data or cost_data()
    fitted = [r for r in published_rows(data) if r.use == "fit"]
    if len(fitted) != 2:
        raise ValueError(f"exactly two published rows must be marked fit, found {len(fitted)}")
    c = fit_neuron((fitted[0], fitted[1]), configs, base)
    return fit_cpu_constants(data, configs, c)


@dataclass(frozen=True)
class Check:
    id: str
    use: str
    expect: str
    padded: bool
    published_tokens_per_s: float
    projected_tokens_per_s: float
    published_ttft_ms: float | None
    projected_ttft_ms: float
    published_tpot_ms: float | None
    projected_tpot_ms: float
    note: str

    @property
    def error(self) -> float:
        """projected / published - 1 of tokens/s."""
        return self.projected_tokens_per_s / self.published_tokens_per_s - 1

    @property
    def ttft_error(self) -> float | None:
        return None if self.published_ttft_ms is None else self.projected_ttft_ms / self.published_ttft_ms - 1


def checks(configs: Configs, c: Constants, data: Mapping[str, Any] | None = None) -> list[Check]:
    """Every fitted and held-out published row (not the excluded ones), projected with `c`."""
    out = []
    for row in published_rows(data):
        if row.use == "excluded":
            continue
        config = configs[row.model]
        run = project(row, config, c)
        out.append(
            Check(
                id=row.id,
                use=row.use,
                expect=row.expect,
                padded=shard(config, row.tp, row.dtype, pad_heads=True).padded,
                published_tokens_per_s=row.tokens_per_s,
                projected_tokens_per_s=run.tokens_per_s(row.counts),
                published_ttft_ms=row.ttft_ms,
                projected_ttft_ms=run.ttft_s * 1e3,
                published_tpot_ms=row.tpot_ms,
                projected_tpot_ms=run.step_s * 1e3,
                note=row.note,
            )
        )
    return out


def cpu_checks(configs: Configs, c: Constants, data: Mapping[str, Any] | None = None) -> list[tuple[Measured, float]]:
    """(measurement, projected tokens/s) of every CPU measurement, at its own batch and context."""
    out = []
    for m in measured_rows(data):
        # a steady decode step at the measurement's mean context (its rate is over decoding, not the prompt)
        step = cpu_step_s(cpu_load(configs[m.model]), m.vcpus, m.batch, m.context, c)
        out.append((m, m.batch / step))
    return out
