"""How long a request takes on NeuronCores: a ring all-reduce, one decode step (the slower of the HBM bytes read
and the FLOPs, plus the collectives), the prefill that yields the first token, and a whole request; with the request
a sequence stands for (half prompt, half answer) and what a rate of tokens costs at an hourly price."""

from __future__ import annotations

import math
from dataclasses import dataclass

from neuron_emu.llm.config import DecoderConfig
from neuron_emu.llm.cost.constants import Constants, CostError
from neuron_emu.llm.cost.cores import Hardware
from neuron_emu.llm.cost.sizing import Shard


def allreduce_s(message_bytes: float, tp: int, hw: Hardware, hop_us: float) -> float:
    """One ring all-reduce of `message_bytes` over `tp` cores: 2 (tp - 1) hops of latency plus message / tp."""
    if tp <= 1:
        return 0.0
    return 2 * (tp - 1) * (hop_us * 1e-6 + message_bytes / tp / hw.link_bytes_per_s(tp))


def _lines(s: Shard, hw: Hardware, dtype: str, batch: int, c: Constants) -> tuple[float, float, float, float, float]:
    """A decode step at context x as max(m0 + m1 x, f0 + f1 x) + collectives: (m0, m1, f0, f1, collectives)."""
    bandwidth = hw.hbm_bytes_per_s_per_core * c.hbm_efficiency
    flops = hw.peak(dtype) * c.compute_efficiency
    m0, m1 = s.read_bytes / bandwidth, batch * s.kv_bytes_per_token / bandwidth
    f0, f1 = batch * 2 * s.matmul_params / flops, batch * s.attention_flops_per_position / flops
    collectives = s.allreduces * allreduce_s(batch * s.allreduce_bytes_per_token, s.tp, hw, c.collective_hop_us)
    return m0, m1, f0, f1, collectives


def decode_step_s(s: Shard, hw: Hardware, dtype: str, batch: int, context: int, c: Constants) -> float:
    """One generated token for each of `batch` sequences whose cache holds `context` tokens."""
    m0, m1, f0, f1, collectives = _lines(s, hw, dtype, batch, c)
    return max(m0 + m1 * context, f0 + f1 * context) + collectives


def _sum_line(a: float, b: float, lo: int, hi: int) -> float:
    """sum of a + b x for integer x in [lo, hi]."""
    if hi < lo:
        return 0.0
    n = hi - lo + 1
    return a * n + b * (lo + hi) * n / 2


def _sum_max(a1: float, b1: float, a2: float, b2: float, lo: int, hi: int) -> float:
    """sum of max(a1 + b1 x, a2 + b2 x) for integer x in [lo, hi], exactly (two lines cross at most once)."""
    if hi < lo:
        return 0.0
    if b1 == b2:
        return _sum_line(max(a1, a2), b1, lo, hi)
    cross = (a2 - a1) / (b1 - b2)
    split = min(hi, max(lo - 1, math.floor(cross)))
    # left of the crossing the line with the smaller slope is above, right of it the steeper one
    flat, steep = ((a1, b1), (a2, b2)) if b1 < b2 else ((a2, b2), (a1, b1))
    return _sum_line(*flat, lo, split) + _sum_line(*steep, split + 1, hi)


def prefill_s(s: Shard, hw: Hardware, dtype: str, batch: int, prompt: int, c: Constants) -> float:
    """Time to first token: the whole prompt of each of `batch` sequences in one pass."""
    bandwidth = hw.hbm_bytes_per_s_per_core * c.hbm_efficiency
    flops = hw.peak(dtype) * c.compute_efficiency
    memory = (s.read_bytes + batch * prompt * s.kv_bytes_per_token) / bandwidth
    work = batch * (
        2 * (s.matmul_params - s.head_params) * prompt
        + 2 * s.head_params  # logits of the last position only
        + s.attention_flops_per_position * prompt * (prompt + 1) / 2  # causal
    )
    message = batch * prompt * s.allreduce_bytes_per_token
    return max(memory, work / flops) + s.allreduces * allreduce_s(message, s.tp, hw, c.collective_hop_us)


@dataclass(frozen=True)
class Generation:
    """One batch of requests: `batch` prompts of `prompt` tokens, `output` tokens generated for each."""

    batch: int
    prompt: int
    output: int
    ttft_s: float
    decode_s: float  # the output - 1 steps after the first token

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s

    @property
    def step_s(self) -> float:
        """Mean time per generated token after the first."""
        return self.decode_s / (self.output - 1) if self.output > 1 else self.ttft_s

    def tokens_per_s(self, counts: str = "output") -> float:
        """Tokens over the whole batch's time: generated ones ("output"), or prompt and generated ("input+output")."""
        tokens = self.output + (self.prompt if counts == "input+output" else 0)
        return self.batch * tokens / self.total_s


def generate(s: Shard, hw: Hardware, dtype: str, batch: int, prompt: int, output: int, c: Constants) -> Generation:
    if prompt < 1 or output < 1 or batch < 1:
        raise CostError(
            f"a request needs a prompt, an output and a batch of at least 1 (got {prompt}/{output}/{batch})"
        )
    ttft = prefill_s(s, hw, dtype, batch, prompt, c)
    m0, m1, f0, f1, collectives = _lines(s, hw, dtype, batch, c)
    # decode steps read caches of prompt + 1 ... prompt + output - 1 tokens
    lo, hi = prompt + 1, prompt + output - 1
    decode = _sum_max(m0, m1, f0, f1, lo, hi) + collectives * max(0, hi - lo + 1)
    return Generation(batch=batch, prompt=prompt, output=output, ttft_s=ttft, decode_s=decode)


def split_request(sequence: int) -> tuple[int, int]:
    """(prompt, output) of a request filling `sequence` tokens: half and half."""
    if sequence < 2:
        raise CostError(f"the sequence length must be at least 2 tokens (a prompt and an answer), got {sequence}")
    prompt = sequence // 2
    return prompt, sequence - prompt


def check_sequence(config: DecoderConfig, sequence: int) -> None:
    if sequence < 2:
        raise CostError(f"the sequence length must be at least 2 tokens (a prompt and an answer), got {sequence}")
    if sequence > config.max_positions:
        raise CostError(f"sequence length {sequence} exceeds the model's {config.max_positions} positions")


def usd_per_m_tokens(usd_per_hour: float | None, tokens_per_s: float | None) -> float | None:
    if usd_per_hour is None or not tokens_per_s:
        return None
    return usd_per_hour / 3600 / tokens_per_s * 1e6
