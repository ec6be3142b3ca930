"""How much a text-generation endpoint takes on: the key/value cache's size, its slots, and each request's share.

From the environment (TGI's and LMI's variable names, container/env.py) where set, else from the model and the
memory. The CPU engine:
- MAX_TOTAL_TOKENS (a request's prompt plus generated tokens; LMI: OPTION_N_POSITIONS): the model's context, at most
  DEFAULT_TOTAL_TOKENS;
- MAX_BATCH_TOTAL_TOKENS (the cache, over all running sequences): room for DEFAULT_SLOTS requests of
  MAX_TOTAL_TOKENS (or for the batch size MAX_BATCH_SIZE / OPTION_MAX_ROLLING_BATCH_SIZE / HF_BATCH_SIZE asks for),
  within KV_MEMORY_SHARE of the memory the container may use (its cgroup limit, else the machine's). The cache is
  allocated whole at start (container/generation/decoder.py), so it is what the server's memory grows by; a request
  that finds no free slot waits, and beyond MAX_CONCURRENT_REQUESTS is refused (503).
A decoder compiled for NeuronCores fixed all of it at compile (`neuron_limits`): its batch lines are the slots, its
max length each request's total, its largest sequence bucket the longest prompt, its cache the device's. A variable
that asks for other shapes (tensor parallel degree, batch size, total tokens, cache, auto-cast type) stops start-up
with one line, as TGI's Neuron backend refuses them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from container.env import MAX_BATCH_TOTAL_TOKENS, EnvError, Named, ServerSettings
from neuron_emu.llm.config import DecoderConfig

if TYPE_CHECKING:
    from container.generation.neuron import CompiledShape

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
    # The longest prompt (a compiled decoder's largest sequence bucket); None: what max_total_tokens leaves.
    max_prompt_tokens: int | None = None
    # The variable a request's total is named by in a refusal (MAX_TOTAL_TOKENS, or OPTION_N_POSITIONS where set).
    total_tokens_variable: str = "MAX_TOTAL_TOKENS"

    @property
    def cache_tokens(self) -> int:
        return self.slots * self.max_total_tokens


def engine_limits(settings: ServerSettings, config: DecoderConfig, memory: int) -> EngineLimits:
    """The CPU engine's limits."""
    total_name = settings.max_total_tokens_variable
    _one_process(settings.tensor_parallel_degree)
    _fp32(settings.auto_cast_type, "the CPU engine computes in float32")
    context = config.max_positions
    per_request = settings.max_total_tokens or min(context, DEFAULT_TOTAL_TOKENS)
    if per_request > context:
        raise EnvError(f"{total_name} {per_request} exceeds the model's context of {context} tokens")
    if per_request < 2:
        raise EnvError(f"{total_name} must leave room for a prompt and one generated token")
    batch = settings.llm_batch_size
    if settings.max_batch_total_tokens:
        cache_tokens = settings.max_batch_total_tokens
    else:
        affordable = int(memory * KV_MEMORY_SHARE) // config.kv_bytes_per_token
        cache_tokens = min((batch.value if batch else DEFAULT_SLOTS) * per_request, affordable)
    slots = cache_tokens // per_request
    if slots < 1:
        raise EnvError(
            f"{MAX_BATCH_TOTAL_TOKENS} {cache_tokens} holds no request of {total_name} {per_request} "
            f"({config.kv_bytes_per_token} cache bytes per token)"
        )
    if batch is not None:
        if slots < batch.value:
            where = (
                f"{MAX_BATCH_TOTAL_TOKENS} {cache_tokens}"
                if settings.max_batch_total_tokens
                else f"{KV_MEMORY_SHARE:.0%} of this container's {memory / 2**30:.1f} GiB"
            )
            raise EnvError(
                f"{batch.variable} {batch.value} sequences of {total_name} {per_request} do not fit the cache: {where} "
                f"holds {slots}"
            )
        slots = batch.value
    return EngineLimits(
        max_total_tokens=per_request,
        slots=slots,
        prefill_chunk=settings.max_batch_prefill_tokens,
        max_concurrent=max(settings.max_concurrent_requests, slots),
        default_new_tokens=min(settings.default_max_new_tokens, per_request - 1),
        total_tokens_variable=total_name,
    )


def neuron_limits(settings: ServerSettings, compiled: CompiledShape) -> EngineLimits:
    """A compiled decoder's limits, its shapes; a setting that asks for others is refused (shapes are fixed)."""
    fixed = "compiled shapes are fixed: compile the model again (sagebox compile --model-dir ...) or drop the variable"
    degree = settings.tensor_parallel_degree
    if degree is not None and degree.value not in (0, compiled.tensor_parallel):
        raise EnvError(
            f"{degree.variable} {degree.value} contradicts the model, compiled for tensor parallel "
            f"{compiled.tensor_parallel} ({fixed}; --tensor-parallel)"
        )
    batch = settings.llm_batch_size
    if batch is not None and batch.value != compiled.batch_size:
        raise EnvError(
            f"{batch.variable} {batch.value} contradicts the model, compiled for batch size {compiled.batch_size} "
            f"({fixed}; --batch-size)"
        )
    total = settings.max_total_tokens
    if total and total != compiled.max_length:
        raise EnvError(
            f"{settings.max_total_tokens_variable} {total} contradicts the model, compiled for {compiled.max_length} "
            f"tokens of prompt plus generation ({fixed}; --max-length)"
        )
    cache = settings.max_batch_total_tokens
    if cache and cache != compiled.batch_size * compiled.max_length:
        raise EnvError(
            f"{MAX_BATCH_TOTAL_TOKENS} {cache} contradicts the model's key/value cache, compiled for "
            f"{compiled.batch_size} x {compiled.max_length} = {compiled.batch_size * compiled.max_length} tokens "
            f"({fixed})"
        )
    cast = settings.auto_cast_type
    if cast is not None and cast.value != compiled.auto_cast_type:
        raise EnvError(
            f"{cast.variable} {cast.value} contradicts the model, compiled with {compiled.auto_cast_type} "
            f"({fixed}; --auto-cast)"
        )
    return EngineLimits(
        max_total_tokens=compiled.max_length,
        slots=compiled.batch_size,
        prefill_chunk=settings.max_batch_prefill_tokens,
        max_concurrent=max(settings.max_concurrent_requests, compiled.batch_size),
        default_new_tokens=min(settings.default_max_new_tokens, compiled.max_length - 1),
        max_prompt_tokens=min(max(compiled.buckets), compiled.max_length - 1),
        total_tokens_variable=settings.max_total_tokens_variable,
    )


def _one_process(degree: Named[int] | None) -> None:
    if degree is not None and degree.value not in (0, 1):
        raise EnvError(
            f"{degree.variable} {degree.value} asks for tensor parallelism: this model runs on the CPU engine, in one "
            "process (compile it for NeuronCores with sagebox compile --tensor-parallel to shard it)"
        )


def _fp32(cast: Named[str] | None, why: str) -> None:
    if cast is not None and cast.value != "fp32":
        raise EnvError(f"{cast.variable} {cast.value} contradicts the model: {why}")
