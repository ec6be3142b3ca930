"""How many bytes a decoder takes on NeuronCores: its parameters, weights and KV cache from the config, each core's
shard at a tensor-parallel degree (NxD Inference's even split, or transformers-neuronx's padding), and whether a
batch of sequences fits beside them in a core's HBM share (`decoder_fit`: what synthesis checks before deploying)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neuron_emu.hardware import GIB
from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import BATCHES, Constants, CostError, dtype_bytes, load_constants
from neuron_emu.llm.cost.cores import Hardware, hardware


@dataclass(frozen=True)
class _Parts:
    """Parameter counts of one layer and of the rest, for given (padded) head and MLP sizes."""

    attention: int  # per layer: q, k, v, o and their biases
    mlp: int  # per layer
    norms: int  # per layer
    embedding: int  # token embedding (V x E)
    lm_head: int  # a separate output matrix (0 when tied to the embedding)
    positions: int  # learned positions (GPT-2, OPT)
    extra: int  # final norm, OPT's project_in/out


def _parts(c: DecoderConfig, heads: int, kv_heads: int, intermediate: int) -> _Parts:
    h, hd = c.hidden_size, c.head_dim
    q, kv = heads * hd, kv_heads * hd
    attention = h * q + 2 * h * kv + q * h
    if c.qkv_bias:
        attention += q + 2 * kv
    if c.out_bias:
        attention += h
    matrices = 3 if c.family == "llama" else 2  # gate/up/down, or fc1/fc2
    mlp = matrices * h * intermediate + ((intermediate + h) if c.mlp_bias else 0)
    layer_norm = c.family != "llama"  # LayerNorm has a bias, RMSNorm does not
    norms = 2 * h * (2 if layer_norm else 1)
    embed_dim = c.embed_dim or h
    embedding = c.vocab_size * embed_dim
    lm_head = 0 if c.tie_embeddings else c.vocab_size * embed_dim
    positions = 0
    extra = h * (2 if layer_norm else 1) if c.norm_before else 0
    if c.family == "gpt2":
        positions = c.max_positions * h
    elif c.family == "opt":
        positions = (c.max_positions + 2) * h
        if embed_dim != h:
            extra += 2 * embed_dim * h
    return _Parts(attention, mlp, norms, embedding, lm_head, positions, extra)


def parameter_count(config: DecoderConfig) -> int:
    """Parameters of the model as its config describes it (embeddings counted once when tied)."""
    p = _parts(config, config.heads, config.kv_heads, config.intermediate_size)
    return config.layers * (p.attention + p.mlp + p.norms) + p.embedding + p.lm_head + p.positions + p.extra


def weight_bytes(config: DecoderConfig, dtype: str = "bf16") -> int:
    return parameter_count(config) * dtype_bytes(dtype)


def kv_bytes_per_token(config: DecoderConfig, dtype: str = "bf16") -> int:
    """KV cache of one token of one sequence over all layers (unsharded)."""
    return 2 * config.layers * config.kv_heads * config.head_dim * dtype_bytes(dtype)


@dataclass(frozen=True)
class Shard:
    """One NeuronCore's part of the model at a tensor-parallel degree."""

    tp: int
    problem: str | None  # why NxD cannot shard the model evenly at this degree (None: it can)
    padded: bool  # the problem is worked around by padding (transformers-neuronx); numbers include the padding
    heads_per_core: int
    kv_heads_per_core: int
    layers: int
    hidden: int
    dtype_bytes: int
    weight_bytes: float  # held by each core
    read_bytes: float  # read by each core per decode step (weights; embedding rows aside)
    matmul_params: float  # per core: parameters one token multiplies through (the head included)
    head_params: float  # per core: the output head's share of matmul_params
    kv_bytes_per_token: float  # per core, per cached token of one sequence
    attention_flops_per_position: float  # per core, per token, per cached position (scores and weighted sum)

    @property
    def allreduces(self) -> int:
        return 2 * self.layers if self.tp > 1 else 0

    @property
    def allreduce_bytes_per_token(self) -> int:
        return self.hidden * self.dtype_bytes


def shard_problem(config: DecoderConfig, tp: int) -> str | None:
    """Why NxD Inference cannot shard `config` evenly over `tp` cores, or None."""
    if tp < 1:
        return f"tensor-parallel degree {tp} is not positive"
    if config.heads % tp:
        return f"{config.heads} heads not divisible by {tp}"
    kv = config.kv_heads
    if kv >= tp and kv % tp:
        return f"{kv} KV heads not divisible by {tp}"
    if kv < tp and tp % kv:
        return f"tp {tp} not a multiple of the {kv} KV heads"
    if config.intermediate_size % tp:
        return f"MLP size {config.intermediate_size} not divisible by {tp}"
    return None


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def shard(config: DecoderConfig, tp: int, dtype: str = "bf16", *, pad_heads: bool = False) -> Shard:
    """Per-core sizes at degree `tp`. With `pad_heads`, a degree NxD refuses is projected as transformers-neuronx
    runs it (heads, KV heads and the MLP rounded up to a multiple of tp) and marked padded."""
    nbytes = dtype_bytes(dtype)
    problem = shard_problem(config, tp)
    if problem is not None and tp < 1:
        raise CostError(problem)
    padded = problem is not None and pad_heads
    heads = _round_up(config.heads, tp) if padded else config.heads
    kv_total = config.kv_heads
    if config.kv_heads < tp:
        kv_total = tp  # replicated: one KV head per core
    elif padded:
        kv_total = _round_up(config.kv_heads, tp)
    if config.kv_heads == config.heads:
        kv_total = heads  # multi-head attention: KV heads follow the (padded) heads
    intermediate = _round_up(config.intermediate_size, tp) if padded else config.intermediate_size
    p = _parts(config, heads, kv_total, intermediate)
    per_layer = (p.attention + p.mlp) / tp + p.norms
    vocab = p.embedding / tp  # vocabulary-parallel
    head = (p.lm_head if p.lm_head else p.embedding) / tp  # a tied head reads the embedding matrix
    held = config.layers * per_layer + vocab + p.lm_head / tp + p.positions + p.extra
    read = config.layers * per_layer + head + p.extra
    matmul = config.layers * (p.attention + p.mlp) / tp + head
    kv_per_core = max(1, kv_total // tp)
    return Shard(
        tp=tp,
        problem=problem,
        padded=padded,
        heads_per_core=max(1, heads // tp),
        kv_heads_per_core=kv_per_core,
        layers=config.layers,
        hidden=config.hidden_size,
        dtype_bytes=nbytes,
        weight_bytes=held * nbytes,
        read_bytes=read * nbytes,
        matmul_params=matmul,
        head_params=head,
        kv_bytes_per_token=2 * config.layers * kv_per_core * config.head_dim * nbytes,
        attention_flops_per_position=4 * config.layers * max(1, heads // tp) * config.head_dim,
    )


@dataclass(frozen=True)
class Fit:
    """Memory per core at a batch and sequence length, against the core's HBM share."""

    weights_bytes: float
    kv_bytes: float
    reserve_bytes: float
    hbm_bytes: float

    @property
    def needed_bytes(self) -> float:
        return self.weights_bytes + self.kv_bytes + self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.hbm_bytes


def core_fit(s: Shard, hw: Hardware, batch: int, sequence: int, c: Constants) -> Fit:
    return Fit(
        weights_bytes=s.weight_bytes,
        kv_bytes=batch * sequence * s.kv_bytes_per_token,
        reserve_bytes=c.reserve_gib_per_core * GIB,
        hbm_bytes=hw.hbm_bytes_per_core,
    )


def _gib(value: float) -> str:
    return f"{value / GIB:.1f}"


def why_not_fit(config: DecoderConfig, s: Shard, hw: Hardware, sequence: int, dtype: str, c: Constants) -> str:
    """One phrase: why batch 1 at `sequence` tokens does not fit (weights alone, or with the cache and reserve)."""
    f = core_fit(s, hw, 1, sequence, c)
    total = weight_bytes(config, dtype)
    core = hw.hbm_bytes_per_core
    if s.weight_bytes > core:
        cores = f"{s.tp} core{'s' if s.tp > 1 else ''}"
        return f"weights {_gib(total)} GiB > {cores} x {_gib(core)} GiB"
    return (
        f"{_gib(f.needed_bytes)} GiB/core (weights {_gib(f.weights_bytes)} GiB, KV {_gib(f.kv_bytes)} GiB, reserve "
        f"{_gib(f.reserve_bytes)} GiB) > {_gib(core)} GiB"
    )


def largest_batch(s: Shard, hw: Hardware, sequence: int, c: Constants, batches: Sequence[int] = BATCHES) -> int:
    """The largest of `batches` whose caches fit beside the weights at `sequence` tokens each (0: not even one)."""
    fitting = [b for b in batches if core_fit(s, hw, b, sequence, c).fits]
    return max(fitting, default=0)


def decoder_fit(
    config: DecoderConfig,
    instance_type: str,
    tp: int,
    *,
    dtype: str = "bf16",
    sequence: int,
    batch: int = 1,
    constants: Constants | None = None,
) -> Fit:
    """Memory one NeuronCore needs for `config` sharded over `tp` cores of `instance_type`, with the KV cache of
    `batch` sequences of `sequence` tokens, against its HBM share (what synthesis checks before deploying)."""
    c = constants or load_constants()
    hw = hardware(instance_type)
    return core_fit(shard(config, tp, dtype, pad_heads=True), hw, batch, sequence, c)
