"""`NeuronDecoder`: a compiled decoder on tp emulated NeuronCores, its KV cache resident on them.

The ranks run in this process, one after the other, segment by segment (neuron_emu.llm.segments); an all-reduce is
the sum of the ranks' partial sums in rank order, handed to every rank. The head (final norm and lm_head) is
replicated, so every rank would compute the same logits: it runs on rank 0 only, whose logits are returned.
Static shapes as on the hardware: a prompt runs in the smallest bucket holding it, a token-generation step in the
smallest bucket holding its longest active line (including the token it feeds), always with all batch_size lines
(idle ones masked, their cache untouched); past max_length is refused. Calls are serialized by a lock.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.llm.buckets import bucket_for
from neuron_emu.llm.cache import DTYPES, KVCache
from neuron_emu.llm.config import DecoderConfig, read_config
from neuron_emu.llm.errors import ContextLengthError, DecoderInputError
from neuron_emu.llm.graphs import GraphSet, StepGraphs, available
from neuron_emu.llm.segments import GraphSpec
from neuron_emu.llm.shard import Layout, RankWeights, check_degree

Tensor = torch.Tensor


@dataclass(frozen=True)
class Settings:
    """What a decoder was compiled for (saved in its directory's decoder.json)."""

    tp_degree: int
    batch_size: int
    max_length: int
    buckets: tuple[int, ...]
    auto_cast: str
    auto_cast_type: str
    compiler_args: str
    cache_dtype: str
    instance_family: str | None = None


def graph_spec(config: DecoderConfig, layout: Layout, batch_size: int, max_length: int) -> GraphSpec:
    return GraphSpec(
        family=config.family, norm_before=config.norm_before, norm_eps=config.norm_eps, activation=config.activation,
        hidden=config.hidden_size, heads=layout.heads, kv_heads=layout.kv_heads, head_dim=layout.head_dim,
        batch_size=batch_size, max_length=max_length,
    )  # fmt: skip


def _all_reduce(partials: Sequence[Tensor]) -> Tensor:
    """The sum of every rank's partial sum, added in rank order."""
    if len(partials) == 1:
        return partials[0]
    total = partials[0].clone()
    for partial in partials[1:]:
        total.add_(partial)
    return total


def _integer(value: object) -> int | None:
    """`value` as an int if it is an integer (numpy and 0-d torch integers too, not bools)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _one_line(exc: BaseException) -> str:
    from neuron_emu.runtime import error_message

    return error_message(exc)


class NeuronDecoder:
    """A decoder LLM compiled for tp NeuronCores: `context_encode` a line's prompt, `token_generate` a step of every
    active line, `generate` greedily on line 0. Logits come back as float32 [vocab] tensors."""

    def __init__(
        self, raw_config: Mapping[str, Any], settings: Settings, graphs: GraphSet, ranks: Sequence[RankWeights]
    ) -> None:
        self.raw_config = dict(raw_config)
        self.settings = settings
        self.config: DecoderConfig = read_config(self.raw_config)
        self.layout = check_degree(self.config, settings.tp_degree, settings.instance_family)
        self.spec = graph_spec(self.config, self.layout, settings.batch_size, settings.max_length)
        self.graphs = graphs
        self.ranks = list(ranks)
        names = available(self.ranks[0])
        self.names = {name: self.spec.names(name, names) for name in ("embed", "attention", "mlp", "finish", "head")}
        self._embed_args = [self._args(rank, "embed") for rank in self.ranks]
        self._layer_args = [
            [tuple(self._args(rank, name, layer) for name in ("attention", "mlp", "finish")) for layer in rank.layers]
            for rank in self.ranks
        ]
        self._head_args = self._args(self.ranks[0], "head")
        self.caches = [KVCache.allocate(self.kv_cache_shape, DTYPES[settings.cache_dtype]) for _ in self.ranks]
        self._lengths = [0] * settings.batch_size
        self.last_bucket: tuple[str, int] | None = None  # ("context" or "token", bucket) of the latest step
        self._lock = threading.Lock()
        self._closed = False

    def _args(self, rank: RankWeights, segment: str, layer: Mapping[str, Tensor] | None = None) -> tuple[Tensor, ...]:
        layer = layer or {}
        return tuple(layer[name] if name in layer else rank.model[name] for name in self.names[segment])

    # --- what it was compiled for ----------------------------------------------------------------------------------

    @property
    def tp_degree(self) -> int:
        return self.settings.tp_degree

    @property
    def batch_size(self) -> int:
        return self.settings.batch_size

    @property
    def buckets(self) -> tuple[int, ...]:
        return self.settings.buckets

    @property
    def max_length(self) -> int:
        return self.settings.max_length

    @property
    def auto_cast(self) -> str:
        return self.settings.auto_cast

    @property
    def kv_cache_shape(self) -> tuple[int, int, int, int, int]:
        """Of the keys (and of the values) one rank holds: [layers, batch, kv_heads/tp (1 if replicated), max_length,
        head_dim]."""
        c = self.config
        return (c.layers, self.batch_size, self.layout.kv_heads, self.max_length, c.head_dim)

    @property
    def kv_cache_bytes(self) -> int:
        """Bytes of KV cache over all ranks: 2 x layers x batch x kv_heads/tp x max_length x head_dim x tp."""
        elements = 2 * self.tp_degree * math.prod(self.kv_cache_shape)
        return elements * DTYPES[self.settings.cache_dtype].itemsize

    def lengths(self) -> list[int]:
        """Tokens each batch line holds in the cache."""
        return list(self._lengths)

    def describe(self) -> dict[str, Any]:
        """What the decoder was compiled for and what its KV cache takes (JSON-ready)."""
        return {
            "model_type": self.config.model_type,
            "family": self.config.family,
            **asdict(self.settings),
            "buckets": list(self.buckets),
            "lm_head": "replicated",
            "execution": "in-process ranks (all-reduce: a sum in rank order)",
            "kv_cache": {
                "dtype": self.settings.cache_dtype,
                "shape_per_rank": list(self.kv_cache_shape),
                "bytes": self.kv_cache_bytes,
            },
        }

    # --- running -------------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ArtifactError("neuron_emu.llm: the decoder is closed; load it again")

    def _check_line(self, line: object) -> int:
        value = _integer(line)
        if value is None or not 0 <= value < self.batch_size:
            raise DecoderInputError(f"batch line {line!r} is not one of 0..{self.batch_size - 1}")
        return value

    def _check_token(self, token: object) -> int:
        value = _integer(token)
        if value is None or not 0 <= value < self.config.vocab_size:
            raise DecoderInputError(f"token id {token!r} is outside the vocabulary (0..{self.config.vocab_size - 1})")
        return value

    def _step(
        self,
        graphs: StepGraphs,
        ids: Tensor,
        positions: Tensor,
        where: tuple[Tensor, ...],
        head: tuple[Tensor, ...],
        lines: Sequence[int],
    ) -> Tensor:
        """Run one step on every rank; if a graph fails, `lines` (whose cache it was writing) are emptied."""
        try:
            # Without TorchScript's profiling re-optimization (a thread-local switch): its warm-up, a few profiled
            # calls per graph, costs more than it saves on graphs this small.
            with torch.no_grad(), torch.jit.optimized_execution(False):
                xs = [cast(Tensor, graphs.embed(ids, positions, *args)) for args in self._embed_args]
                for layer in range(self.config.layers):
                    partials = [
                        cast(
                            Tensor, graphs.attention(x, *where, cache.keys[layer], cache.values[layer], *args[layer][0])
                        )
                        for x, cache, args in zip(xs, self.caches, self._layer_args, strict=True)
                    ]
                    reduced = _all_reduce(partials)
                    outs = [
                        cast(tuple[Tensor, Tensor], graphs.mlp(x, reduced, *args[layer][1]))
                        for x, args in zip(xs, self._layer_args, strict=True)
                    ]
                    reduced = _all_reduce([out[1] for out in outs])
                    xs = [
                        cast(Tensor, graphs.finish(out[0], reduced, *args[layer][2]))
                        for out, args in zip(outs, self._layer_args, strict=True)
                    ]
                return cast(Tensor, graphs.head(xs[0], *head, *self._head_args)).float()
        except RuntimeError as exc:
            for line in lines:
                self._lengths[line] = 0
            raise ArtifactError(f"neuron_emu.llm: a graph failed: {_one_line(exc)}") from None

    def context_encode(self, line: int, input_ids: Sequence[int]) -> Tensor:
        """Run a prompt on batch line `line` (its cache reset to the prompt's keys and values): the logits [vocab]
        of its last token."""
        line = self._check_line(line)
        ids = [self._check_token(token) for token in input_ids]
        if not ids:
            raise DecoderInputError("the prompt is empty: context encoding needs at least one token")
        if len(ids) > self.max_length:
            raise ContextLengthError(f"a prompt of {len(ids)} tokens is past max_length {self.max_length}")
        bucket = bucket_for(len(ids), self.buckets, f"a prompt of {len(ids)} tokens")
        padded = torch.zeros(bucket, dtype=torch.int64)
        padded[: len(ids)] = torch.tensor(ids, dtype=torch.int64)
        with self._lock:
            self._check_open()
            logits = self._step(
                self.graphs.context[bucket], padded, torch.arange(bucket), (torch.tensor([line]),),
                (torch.tensor([len(ids) - 1]),), [line],
            )  # fmt: skip
            self._lengths[line] = len(ids)
            self.last_bucket = ("context", bucket)
        return logits[0]

    def token_generate(self, tokens: Mapping[int, int], positions: Mapping[int, int]) -> dict[int, Tensor]:
        """One token-generation step: for each active line, the token fed at its position (at most the tokens the
        line holds: no gaps); every active line's logits [vocab]. Lines not named stay idle, their cache kept."""
        if set(tokens) != set(positions):
            raise DecoderInputError(f"tokens name lines {sorted(tokens)} but positions name {sorted(positions)}")
        if not tokens:
            return {}
        lines = sorted(self._check_line(line) for line in tokens)
        ids = torch.zeros(self.batch_size, dtype=torch.int64)
        where = torch.zeros(self.batch_size, dtype=torch.int64)
        active = torch.zeros(self.batch_size, dtype=torch.bool)
        with self._lock:
            self._check_open()
            for line in lines:
                position = _integer(positions[line])
                if position is None or position < 0:
                    raise DecoderInputError(
                        f"position {positions[line]!r} of line {line} is not a non-negative integer"
                    )
                if position >= self.max_length:
                    raise ContextLengthError(f"position {position} of line {line} is past max_length {self.max_length}")
                if position > self._lengths[line]:
                    raise DecoderInputError(
                        f"line {line} holds {self._lengths[line]} tokens: position {position} would leave a gap"
                    )
                ids[line], where[line], active[line] = self._check_token(tokens[line]), position, True
            longest = int(where.max()) + 1
            bucket = bucket_for(longest, self.buckets, f"a sequence of {longest} tokens")
            logits = self._step(self.graphs.token[bucket], ids, where, (where, active), (), lines)
            for line in lines:
                self._lengths[line] = int(where[line]) + 1
            self.last_bucket = ("token", bucket)
        return {line: logits[line] for line in lines}

    def generate(self, input_ids: Sequence[int], max_new_tokens: int, eos_token_ids: Sequence[int] = ()) -> list[int]:
        """Greedy decoding on line 0: the new tokens (ending with an end-of-sequence token if one came)."""
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise DecoderInputError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        total = len(input_ids) + max_new_tokens
        if total > self.max_length:
            raise ContextLengthError(
                f"a prompt of {len(input_ids)} tokens and {max_new_tokens} new ones "
                f"is past max_length {self.max_length}"
            )
        if max_new_tokens == 0:
            return []
        stops = set(eos_token_ids)
        logits = self.context_encode(0, input_ids)
        out: list[int] = []
        position = len(input_ids)
        while True:
            token = int(torch.argmax(logits))
            out.append(token)
            if token in stops or len(out) == max_new_tokens:
                return out
            logits = self.token_generate({0: token}, {0: position})[0]
            position += 1

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release the KV cache and the weights; the decoder cannot run (or be saved) afterwards."""
        with self._lock:
            self._closed = True
            self.caches = []
            self.ranks = []
            self._embed_args, self._layer_args, self._head_args = [], [], ()

    def __enter__(self) -> NeuronDecoder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
