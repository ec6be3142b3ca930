"""How much a text-generation endpoint takes on: the key/value cache's size, its slots, and each request's share.

From the environment (TGI's variable names, container/env.py) where set, else from the model and the memory:
- MAX_TOTAL_TOKENS (a request's prompt plus generated tokens): the model's context, at most DEFAULT_TOTAL_TOKENS;
- MAX_BATCH_TOTAL_TOKENS (the cache, over all running sequences): room for DEFAULT_SLOTS requests of
  MAX_TOTAL_TOKENS, within KV_MEMORY_SHARE of the memory the container may use (its cgroup limit, else the
  machine's). The cache is allocated whole at start (container/generation/decoder.py), so it is what the server's
  memory grows by; a request that finds no free slot waits, and beyond MAX_CONCURRENT_REQUESTS is refused (503).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from container.env import MAX_BATCH_TOTAL_TOKENS, MAX_TOTAL_TOKENS, EnvError, ServerSettings
from neuron_emu.llm.config import DecoderConfig

DEFAULT_TOTAL_TOKENS = 2048
DEFAULT_SLOTS = 16
KV_MEMORY_SHARE = 0.25  # the weights, activations and the rest of the server need the remainder


@dataclass(frozen=True)
class EngineLimits:
    max_total_tokens: int  # one request: prompt + generated
    slots: int  # sequences running at once
    prefill_chunk: int
    max_concurrent: int  # running + waiting
    default_new_tokens: int

    @property
    def cache_tokens(self) -> int:
        return self.slots * self.max_total_tokens


def memory_bytes() -> int:
    """The memory this process may use: the cgroup v2/v1 limit where one is set, else the machine's total."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:
            return int(raw)
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 4 << 30


def engine_limits(settings: ServerSettings, config: DecoderConfig, memory: int) -> EngineLimits:
    context = config.max_positions
    per_request = settings.max_total_tokens or min(context, DEFAULT_TOTAL_TOKENS)
    if per_request > context:
        raise EnvError(f"{MAX_TOTAL_TOKENS} {per_request} exceeds the model's context of {context} tokens")
    if per_request < 2:
        raise EnvError(f"{MAX_TOTAL_TOKENS} must leave room for a prompt and one generated token")
    if settings.max_batch_total_tokens:
        cache_tokens = settings.max_batch_total_tokens
    else:
        affordable = int(memory * KV_MEMORY_SHARE) // config.kv_bytes_per_token
        cache_tokens = min(DEFAULT_SLOTS * per_request, affordable)
    slots = cache_tokens // per_request
    if slots < 1:
        raise EnvError(
            f"{MAX_BATCH_TOTAL_TOKENS} {cache_tokens} holds no request of {MAX_TOTAL_TOKENS} {per_request} "
            f"({config.kv_bytes_per_token} cache bytes per token)"
        )
    return EngineLimits(
        max_total_tokens=per_request,
        slots=slots,
        prefill_chunk=settings.max_batch_prefill_tokens,
        max_concurrent=max(settings.max_concurrent_requests, slots),
        default_new_tokens=min(settings.default_max_new_tokens, per_request - 1),
    )
