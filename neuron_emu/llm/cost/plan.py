"""The whole plan of a decoder LLM: its NeuronCore and CPU rows beside the model's sizes, the constants and the
assumptions behind them; as JSON (`LlmPlan.to_json`) or as the text `sagebox plan` prints (`render`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from neuron_emu.hardware import GIB
from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import BATCHES, Constants
from neuron_emu.llm.cost.neuron import NeuronRow
from neuron_emu.llm.cost.sizing import kv_bytes_per_token, parameter_count, weight_bytes

ASSUMPTIONS = (
    "Estimate only: nothing here ran on Neuron hardware. Two constants (HBM efficiency, collective hop latency) are "
    "fitted to two published Neuron figures and checked against the others (docs/llm-plan.md, "
    "neuron_emu/data/llm_cost.json).",
    "A decode step reads every weight except the embedding rows, plus the KV cache of its context, at the core's "
    "share of its chip's HBM bandwidth times the fitted efficiency; compute (2 FLOPs per parameter per token plus "
    "attention over the context) at the tensor engine's peak for the dtype times an ASSUMED efficiency (not fitted); "
    "the slower of the two sets the step (DMA overlaps compute).",
    "Two ring all-reduces per layer per step (hidden-state partial sums), each 2 (tp - 1) hops of the fitted hop "
    "latency plus message / tp over the slowest link crossed (neuron_emu/data/interconnect.json); no overlap with "
    "compute.",
    "Memory per core: weights / tp (embedding and head vocabulary-parallel; norms replicated), the KV cache of batch x "
    "sequence tokens (KV heads replicated to one per core when tp exceeds them), and a fixed reserve for the runtime.",
    "A request is a prompt of half the sequence length and an answer of the other half; tokens/s counts generated "
    "tokens over the whole request (prefill included); ms/token is the mean decode step.",
    "Time to first token uses the same roofline at the assumed compute efficiency; no published figure was fitted "
    "for it, and transformers-neuronx's published TTFTs are several times longer: treat it as a lower bound.",
    "Host work is not modelled (sampling, tokenizing, the logits' copy to the host): published batch-256 figures are "
    "far below this model's, so the largest-batch column is an upper bound.",
    "Replicas: an instance runs cores // tp copies of the model, each serving its own batch.",
)


@dataclass(frozen=True)
class LlmPlan:
    model: dict[str, Any]
    dtype: str
    sequence: int
    prompt: int
    output: int
    pad_heads: bool
    neuron: list[NeuronRow]
    cpu: list[Any]  # neuron_emu.llm.cost.cpu.CpuRow
    constants: dict[str, Any]
    assumptions: list[str] = field(default_factory=lambda: list(ASSUMPTIONS))
    estimate: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def model_summary(config: DecoderConfig, dtype: str) -> dict[str, Any]:
    return {
        "model_type": config.model_type,
        "layers": config.layers,
        "hidden": config.hidden_size,
        "heads": config.heads,
        "kv_heads": config.kv_heads,
        "intermediate": config.intermediate_size,
        "vocab": config.vocab_size,
        "max_positions": config.max_positions,
        "parameters": parameter_count(config),
        "weights_gib": weight_bytes(config, dtype) / GIB,
        "kv_bytes_per_token": kv_bytes_per_token(config, dtype),
    }


def constants_summary(c: Constants) -> dict[str, Any]:
    return asdict(c)


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def render(plan: LlmPlan) -> str:
    m = plan.model
    lines = [
        "sagebox plan - an ESTIMATE (fitted to published Neuron figures; not measured on Neuron or c6i hardware)",
        f"model: {m['model_type']}, {m['parameters'] / 1e9:.2f} B parameters, {m['layers']} layers, hidden "
        f"{m['hidden']}, {m['heads']} heads / {m['kv_heads']} KV heads; {plan.dtype} weights {m['weights_gib']:.1f} "
        f"GiB, KV cache {m['kv_bytes_per_token'] / 1024**2:.2f} MiB per token",
        f"request: {plan.prompt}-token prompt + {plan.output} generated = sequence {plan.sequence}; batches "
        f"{', '.join(str(b) for b in BATCHES)}; tok/s and $ are per instance (all replicas)",
        "",
        f"{'instance':<17} {'tp':>3} {'rep':>3} {'GiB/core':>8} {'TTFT ms':>8} {'ms/tok':>7} {'tok/s b1':>8} "
        f"{'max b':>5} {'tok/s':>7} {'$/M tok':>8}  fits",
    ]
    for r in plan.neuron:
        fits = ("yes" + (f" ({r.reason})" if r.reason else "")) if r.fits else f"no: {r.reason}"
        lines.append(
            f"{r.instance_type:<17} {r.tp:>3} {r.replicas:>3} {_num(r.gib_per_core):>8} {_num(r.ttft_ms):>8} "
            f"{_num(r.ms_per_token):>7} {_num(r.tokens_per_s_b1):>8} {r.max_batch or '-':>5} "
            f"{_num(r.tokens_per_s_max_batch):>7} {_usd(r.usd_per_m_tokens_max_batch):>8}  {fits}"
        )
    if plan.cpu:
        lines += [
            "",
            "CPU (Sagebox's eager PyTorch engine, FP32 whatever --dtype says; bandwidth and FLOP/s per vCPU fitted on "
            "a 2-vCPU machine and ASSUMED to scale with vCPUs):",
            f"{'instance':<17} {'vCPU':>4} {'GiB':>8} {'TTFT ms':>8} {'ms/tok':>7} {'tok/s b1':>8} {'max b':>5} "
            f"{'tok/s':>7} {'$/M tok':>8}  fits",
        ]
        for r in plan.cpu:
            fits = "yes" if r.fits else f"no: {r.reason}"
            lines.append(
                f"{r.instance_type:<17} {r.vcpus:>4} {_num(r.gib_needed):>8} {_num(r.ttft_ms):>8} "
                f"{_num(r.ms_per_token):>7} {_num(r.tokens_per_s_b1):>8} {r.max_batch or '-':>5} "
                f"{_num(r.tokens_per_s_max_batch):>7} {_usd(r.usd_per_m_tokens_max_batch):>8}  {fits}"
            )
    c = plan.constants
    lines += [
        "",
        f"constants: HBM efficiency {c['hbm_efficiency']:.3f} and collective hop {c['collective_hop_us']:.2f} us "
        f"(fitted: {', '.join(c['fitted_to'])}); compute efficiency {c['compute_efficiency']:.2f} (assumed); "
        f"reserve {c['reserve_gib_per_core']:.1f} GiB per core",
        "assumptions:",
        *(f"  - {a}" for a in plan.assumptions),
    ]
    return "\n".join(lines) + "\n"
