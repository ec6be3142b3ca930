"""Sequence-length buckets: the fixed lengths the graphs are compiled for, and which one a request runs in.

As NxD Inference does it (neuronx_distributed_inference.modules.autobucketing): a context-encoding request runs in
the smallest bucket holding its prompt (a 300-token prompt in the 512 bucket), a token-generation step in the
smallest bucket holding the longest active sequence including the token it feeds; the KV cache itself is
max_length long. Default buckets: the powers of two from 128 below max_length, then max_length itself (NxD's
generate_buckets(128, max_length) also drops a power of two close to max_length; these keep it).
"""

from __future__ import annotations

from collections.abc import Sequence

from neuron_emu.llm.errors import ContextLengthError, DecoderCompileError

SMALLEST_DEFAULT_BUCKET = 128


def default_buckets(max_length: int) -> tuple[int, ...]:
    powers: list[int] = []
    size = SMALLEST_DEFAULT_BUCKET
    while size < max_length:
        powers.append(size)
        size *= 2
    return (*powers, max_length)


def check_buckets(buckets: Sequence[int] | None, max_length: int) -> tuple[int, ...]:
    """The buckets sorted, each a positive length, the largest max_length (the length of the KV cache)."""
    if buckets is None:
        return default_buckets(max_length)
    if isinstance(buckets, int | str) or not buckets:
        raise DecoderCompileError(f"buckets must be a non-empty list of sequence lengths, got {buckets!r}")
    values: list[int] = []
    for bucket in buckets:
        if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 1:
            raise DecoderCompileError(f"every bucket must be a positive integer length, got {bucket!r}")
        values.append(bucket)
    ordered = tuple(sorted(set(values)))
    if ordered[-1] != max_length:
        raise DecoderCompileError(
            f"the largest bucket ({ordered[-1]}) must equal max_length ({max_length}), the length of the KV cache"
        )
    return ordered


def bucket_for(length: int, buckets: Sequence[int], what: str) -> int:
    """The smallest bucket holding `length` tokens; ContextLengthError past the largest."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    raise ContextLengthError(f"{what} needs {length} positions, past max_length {buckets[-1]} of the compiled decoder")
