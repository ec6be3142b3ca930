"""The CPU counterpart of `neuron`: Sagebox's own eager PyTorch FP32 engine (container/generation) on a
CPU instance, per token, from a config alone: an ESTIMATE.

One decode step = (weights + the KV cache of the context) / (vCPUs x bytes/s per vCPU) + FLOPs / (vCPUs x FLOP/s
per vCPU): eager PyTorch streams each weight and multiplies with the same cores, so the two add (a NeuronCore's DMA
engines overlap them instead). The two per-vCPU rates are fitted to the project's own measurement (docs/generation.md,
"Measured": SmolLM2-135M FP32 on 2 vCPUs, one stream and 16 streams); that they scale linearly with vCPUs, and that
a c6i core matches the machine they were measured on, are ASSUMPTIONS (memory bandwidth saturates on real sockets).
The caller passes the instance types (vCPUs, memory) and prices: neuron_emu reads neither from infra.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from neuron_emu.hardware import GIB, price_for
from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import BATCHES, Constants
from neuron_emu.llm.cost.sizing import kv_bytes_per_token, parameter_count
from neuron_emu.llm.cost.timing import Generation, check_sequence, split_request, usd_per_m_tokens

ENGINE_DTYPE = "fp32"  # the engine runs FP32 whatever dtype a plan asks for on NeuronCores


@dataclass(frozen=True)
class CpuInstance:
    name: str
    vcpus: int
    memory_gib: float


@dataclass(frozen=True)
class CpuLoad:
    """What one decode step of the FP32 engine moves and computes, per sequence where it says so."""

    read_bytes: float  # weights (all but the embedding rows)
    weight_bytes: float  # held in memory
    kv_bytes_per_token: float
    matmul_params: float
    attention_flops_per_position: float


def cpu_load(config: DecoderConfig) -> CpuLoad:
    nbytes = 4
    params = parameter_count(config)
    embed_dim = config.embed_dim or config.hidden_size
    embedding = config.vocab_size * embed_dim
    extra = {"gpt2": 0, "opt": 2}.get(config.family)
    positions = (config.max_positions + extra) * config.hidden_size if extra is not None else 0
    # an untied embedding is only looked up; a tied one is also the head, read in full every step
    lookup_only = (embedding if not config.tie_embeddings else 0) + positions
    matmul = params - lookup_only
    return CpuLoad(
        read_bytes=matmul * nbytes,
        weight_bytes=params * nbytes,
        kv_bytes_per_token=kv_bytes_per_token(config, ENGINE_DTYPE),
        matmul_params=matmul,
        attention_flops_per_position=4 * config.layers * config.heads * config.head_dim,
    )


def cpu_step_s(load: CpuLoad, vcpus: int, batch: int, context: float, c: Constants) -> float:
    bandwidth = vcpus * c.cpu_bytes_per_s_per_vcpu
    flops = vcpus * c.cpu_flops_per_s_per_vcpu
    memory = (load.read_bytes + batch * context * load.kv_bytes_per_token) / bandwidth
    work = batch * (2 * load.matmul_params + load.attention_flops_per_position * context) / flops
    return memory + work


def cpu_generate(load: CpuLoad, vcpus: int, batch: int, prompt: int, output: int, c: Constants) -> Generation:
    bandwidth = vcpus * c.cpu_bytes_per_s_per_vcpu
    flops = vcpus * c.cpu_flops_per_s_per_vcpu
    ttft = (load.read_bytes + batch * prompt * load.kv_bytes_per_token) / bandwidth + batch * (
        2 * load.matmul_params * prompt + load.attention_flops_per_position * prompt * (prompt + 1) / 2
    ) / flops
    steps = max(0, output - 1)
    # the step is linear in the context: the mean context of the steps gives their sum exactly
    decode = steps * cpu_step_s(load, vcpus, batch, prompt + output / 2, c) if steps else 0.0
    return Generation(batch=batch, prompt=prompt, output=output, ttft_s=ttft, decode_s=decode)


def fit_cpu(config: DecoderConfig, vcpus: int, points: Sequence[tuple[int, float, float]]) -> tuple[float, float]:
    """(bytes/s per vCPU, FLOP/s per vCPU) so that two measured decode rates are met exactly.

    `points`: two (batch, context, generated tokens/s over all sequences) measured with `vcpus` threads. The step is
    linear in 1/bandwidth and 1/FLOP-rate, so two points fix both.
    """
    if len(points) != 2 or points[0][0] == points[1][0]:
        raise ValueError("fitting the CPU engine needs two measurements at two different batch sizes")
    load = cpu_load(config)
    rows = []
    for batch, context, rate in points:
        step = batch / rate
        bytes_moved = (load.read_bytes + batch * context * load.kv_bytes_per_token) / vcpus
        work = batch * (2 * load.matmul_params + load.attention_flops_per_position * context) / vcpus
        rows.append((bytes_moved, work, step))
    (a1, b1, y1), (a2, b2, y2) = rows
    det = a1 * b2 - a2 * b1
    inverse_bandwidth = (y1 * b2 - y2 * b1) / det
    inverse_flops = (a1 * y2 - a2 * y1) / det
    if inverse_bandwidth <= 0 or inverse_flops <= 0:
        raise ValueError("the two measurements cannot be explained by a positive bandwidth and FLOP rate")
    return 1 / inverse_bandwidth, 1 / inverse_flops


@dataclass(frozen=True)
class CpuRow:
    instance_type: str
    vcpus: int
    memory_gib: float
    fits: bool
    reason: str
    gib_needed: float  # at batch 1: weights + KV cache + reserve
    ttft_ms: float | None = None
    ms_per_token: float | None = None
    tokens_per_s_b1: float | None = None
    max_batch: int | None = None
    tokens_per_s_max_batch: float | None = None
    usd_per_hour: float | None = None
    usd_per_m_tokens_b1: float | None = None
    usd_per_m_tokens_max_batch: float | None = None


def cpu_plan(
    config: DecoderConfig,
    instances: Sequence[CpuInstance],
    *,
    sequence: int,
    constants: Constants,
    prices: Mapping[str, float] | None = None,
) -> list[CpuRow]:
    check_sequence(config, sequence)
    load = cpu_load(config)
    prompt, output = split_request(sequence)
    rows = []
    for inst in instances:
        price = price_for(prices, inst.name)
        reserve = constants.cpu_reserve_gib * GIB

        def need(batch: int, load: CpuLoad = load, reserve: float = reserve) -> float:
            return load.weight_bytes + batch * sequence * load.kv_bytes_per_token + reserve

        gib = need(1) / GIB
        if need(1) > inst.memory_gib * GIB:
            reason = (
                f"{gib:.1f} GiB (FP32 weights {load.weight_bytes / GIB:.1f} GiB, KV "
                f"{sequence * load.kv_bytes_per_token / GIB:.1f} GiB, reserve {constants.cpu_reserve_gib:.1f} GiB) > "
                f"{inst.memory_gib:.1f} GiB"
            )
            rows.append(CpuRow(inst.name, inst.vcpus, inst.memory_gib, False, reason, gib, usd_per_hour=price))
            continue
        top = max(b for b in BATCHES if need(b) <= inst.memory_gib * GIB)
        one = cpu_generate(load, inst.vcpus, 1, prompt, output, constants)
        many = cpu_generate(load, inst.vcpus, top, prompt, output, constants)
        rate_b1, rate_top = one.tokens_per_s(), many.tokens_per_s()
        rows.append(
            CpuRow(
                instance_type=inst.name,
                vcpus=inst.vcpus,
                memory_gib=inst.memory_gib,
                fits=True,
                reason="",
                gib_needed=gib,
                ttft_ms=one.ttft_s * 1e3,
                ms_per_token=one.step_s * 1e3,
                tokens_per_s_b1=rate_b1,
                max_batch=top,
                tokens_per_s_max_batch=rate_top,
                usd_per_hour=price,
                usd_per_m_tokens_b1=usd_per_m_tokens(price, rate_b1),
                usd_per_m_tokens_max_batch=usd_per_m_tokens(price, rate_top),
            )
        )
    return rows
