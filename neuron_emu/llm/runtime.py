"""`NeuronDecoder`: a compiled decoder on tp emulated NeuronCores, its KV cache resident on them.

Two executors run the ranks, segment by segment (neuron_emu.llm.segments), with the same graphs and the same
`RankSet` code. "in_process" (the default): every rank in this process, one after the other; an all-reduce is the
sum of the ranks' partial sums in rank order, handed to every rank. "processes" (neuron_emu.llm.processes): one
worker process per rank holding its weights and its KV cache, the all-reduces gloo collectives among the workers;
this process sends token ids and positions per step and gets rank 0's logits back. The head (final norm and lm_head)
is replicated, so every rank would compute the same logits: it runs on rank 0 only, whose logits are returned.
Static shapes as on the hardware: a prompt runs in the smallest bucket holding it, a token-generation step in the
smallest bucket holding its longest active line (including the token it feeds), always with all batch_size lines
(idle ones masked, their cache untouched); past max_length is refused. Calls are serialized by a lock.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.llm.buckets import bucket_for
from neuron_emu.llm.cache import DTYPES, KVCache
from neuron_emu.llm.config import DecoderConfig, read_config
from neuron_emu.llm.errors import ContextLengthError, DecoderInputError
from neuron_emu.llm.graphs import GraphSet, StepGraphs, available
from neuron_emu.llm.segments import SEGMENTS, GraphSpec
from neuron_emu.llm.shard import Layout, RankWeights, check_degree

if TYPE_CHECKING:
    from neuron_emu.llm.processes import DecoderWorkers

Tensor = torch.Tensor
EXECUTORS = ("in_process", "processes")


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


def cache_shape(config: DecoderConfig, layout: Layout, batch_size: int, max_length: int) -> tuple[int, ...]:
    """Of the keys (and of the values) one rank holds: [layers, batch, kv_heads/tp, max_length, head_dim]."""
    return (config.layers, batch_size, layout.kv_heads, max_length, config.head_dim)


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


class RankSet:
    """Ranks of one decoder held in one process: their weights, their KV caches and the graphs. `step` runs a step
    on each of them segment by segment, all-reducing the partial sums with `all_reduce` (by default the sum in rank
    order of the ranks held here: all of them); the head runs on the first rank held if `head`."""

    def __init__(
        self,
        spec: GraphSpec,
        graphs: GraphSet,
        ranks: Sequence[RankWeights],
        shape: tuple[int, ...],
        cache_dtype: torch.dtype,
        *,
        all_reduce: Callable[[Sequence[Tensor]], Tensor] | None = None,
        head: bool = True,
    ) -> None:
        self.graphs = graphs
        self.ranks = list(ranks)
        names = available(self.ranks[0])
        self.names = {name: spec.names(name, names) for name in SEGMENTS}
        self.layers = len(self.ranks[0].layers)
        self._embed_args = [self._args(rank, "embed") for rank in self.ranks]
        self._layer_args = [
            [tuple(self._args(rank, name, layer) for name in ("attention", "mlp", "finish")) for layer in rank.layers]
            for rank in self.ranks
        ]
        self._head_args = self._args(self.ranks[0], "head") if head else None
        self.caches = [KVCache.allocate(shape, cache_dtype) for _ in self.ranks]
        self.all_reduce = all_reduce or _all_reduce

    def _args(self, rank: RankWeights, segment: str, layer: Mapping[str, Tensor] | None = None) -> tuple[Tensor, ...]:
        layer = layer or {}
        return tuple(layer[name] if name in layer else rank.model[name] for name in self.names[segment])

    def step(
        self,
        kind: str,
        bucket: int,
        ids: Tensor,
        positions: Tensor,
        where: tuple[Tensor, ...],
        head: tuple[Tensor, ...],
    ) -> Tensor | None:
        """Run one step ("context" or "token" graphs of `bucket`) on every rank held: the float32 logits if the head
        runs here, else None."""
        graphs: StepGraphs = (self.graphs.context if kind == "context" else self.graphs.token)[bucket]
        # Without TorchScript's profiling re-optimization (a thread-local switch): its warm-up, a few profiled calls
        # per graph, costs more than it saves on graphs this small.
        with torch.no_grad(), torch.jit.optimized_execution(False):
            xs = [cast(Tensor, graphs.embed(ids, positions, *args)) for args in self._embed_args]
            for layer in range(self.layers):
                partials = [
                    cast(Tensor, graphs.attention(x, *where, cache.keys[layer], cache.values[layer], *args[layer][0]))
                    for x, cache, args in zip(xs, self.caches, self._layer_args, strict=True)
                ]
                reduced = self.all_reduce(partials)
                outs = [
                    cast(tuple[Tensor, Tensor], graphs.mlp(x, reduced, *args[layer][1]))
                    for x, args in zip(xs, self._layer_args, strict=True)
                ]
                reduced = self.all_reduce([out[1] for out in outs])
                xs = [
                    cast(Tensor, graphs.finish(out[0], reduced, *args[layer][2]))
                    for out, args in zip(outs, self._layer_args, strict=True)
                ]
            if self._head_args is None:
                return None
            return cast(Tensor, graphs.head(xs[0], *head, *self._head_args)).float()

    def close(self) -> None:
        self.caches, self.ranks = [], []
        self._embed_args, self._layer_args, self._head_args = [], [], None


class NeuronDecoder:
    """A decoder LLM compiled for tp NeuronCores: `context_encode` a line's prompt, `token_generate` a step of every
    active line, `generate` greedily on line 0. Logits come back as float32 [vocab] tensors.

    `graphs` and `ranks` are the compiled graphs and every rank's weights; with `workers` (the "processes"
    executor) the ranks run there, each worker holding its weights and KV cache, and `graphs` and `ranks` may be
    left out (a loaded decoder's parent holds neither) or kept (a compiled decoder keeps them to be saved)."""

    def __init__(
        self,
        raw_config: Mapping[str, Any],
        settings: Settings,
        graphs: GraphSet | None,
        ranks: Sequence[RankWeights],
        *,
        workers: DecoderWorkers | None = None,
    ) -> None:
        self.raw_config = dict(raw_config)
        self.settings = settings
        self.config: DecoderConfig = read_config(self.raw_config)
        self.layout = check_degree(self.config, settings.tp_degree, settings.instance_family)
        self.spec = graph_spec(self.config, self.layout, settings.batch_size, settings.max_length)
        self._graphs = graphs
        self.ranks = list(ranks)
        self._local: RankSet | None = None
        self._workers: DecoderWorkers | None = None
        self._lengths = [0] * settings.batch_size
        self.last_bucket: tuple[str, int] | None = None  # ("context" or "token", bucket) of the latest step
        self._lock = threading.Lock()
        self._closed = False
        if workers is not None:
            self._workers = workers
        elif graphs is None or not self.ranks:
            raise ArtifactError("neuron_emu.llm: an in-process decoder needs its graphs and every rank's weights")
        else:
            self._local = RankSet(self.spec, graphs, self.ranks, self.kv_cache_shape, DTYPES[settings.cache_dtype])

    def _run_on(self, workers: DecoderWorkers) -> None:
        """Hand the ranks to `workers` (started on this decoder's saved files): the local caches are dropped."""
        with self._lock:
            self._check_open()
            if self._local is not None:
                self._local.close()
            self._local, self._workers = None, workers
            self._lengths = [0] * self.batch_size

    @property
    def executor(self) -> str:
        """ "in_process" or "processes" (one worker process per rank)."""
        return "processes" if self._workers is not None else "in_process"

    @property
    def graphs(self) -> GraphSet:
        if self._graphs is None:
            raise ArtifactError("neuron_emu.llm: the graphs are in the worker processes, not in this one")
        return self._graphs

    @property
    def caches(self) -> list[KVCache]:
        """Every rank's KV cache when the ranks run in this process; empty with the "processes" executor (each
        worker holds its own) and once closed."""
        return list(self._local.caches) if self._local is not None else []

    @property
    def worker_pids(self) -> list[int]:
        """The worker processes' pids in rank order ("processes" executor, while running); else empty."""
        return self._workers.pids if self._workers is not None else []

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
        shape = cache_shape(self.config, self.layout, self.batch_size, self.max_length)
        return cast(tuple[int, int, int, int, int], shape)

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
            "executor": self.executor,
            "execution": (
                "a worker process per rank (all-reduce: gloo over loopback)"
                if self._workers is not None
                else "in-process ranks (all-reduce: a sum in rank order)"
            ),
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
        self, kind: str, bucket: int, ids: Tensor, positions: Tensor, where: tuple[Tensor, ...],
        head: tuple[Tensor, ...], lines: Sequence[int],
    ) -> Tensor:  # fmt: skip
        """Run one step on every rank; if it fails, `lines` (whose cache it was writing) are emptied."""
        try:
            if self._workers is not None:
                return self._workers.step(kind, bucket, ids, positions, where, head)
            assert self._local is not None
            return cast(Tensor, self._local.step(kind, bucket, ids, positions, where, head))
        except RuntimeError as exc:
            self._empty(lines)
            raise ArtifactError(f"neuron_emu.llm: a graph failed: {_one_line(exc)}") from None
        except ArtifactError:  # a worker failed: the workers are stopped
            self._empty(lines)
            raise

    def _empty(self, lines: Sequence[int]) -> None:
        for line in lines:
            self._lengths[line] = 0

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
                "context", bucket, padded, torch.arange(bucket), (torch.tensor([line]),),
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
            logits = self._step("token", bucket, ids, where, (where, active), (), lines)
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

    def become(self, uid: int, gid: int) -> None:
        """The worker processes ("processes" executor) take uid/gid, as the serving process does once it has loaded
        the model as root; nothing to do when the ranks run in this process."""
        if self._workers is not None:
            self._workers.become(uid, gid)

    def close(self) -> None:
        """Release the KV cache and the weights (stopping the worker processes, if any, and waiting until they have
        exited); the decoder cannot run (or be saved) afterwards."""
        with self._lock:
            self._closed = True
            if self._local is not None:
                self._local.close()
            workers, self._local, self._workers = self._workers, None, None
            self.ranks = []
        if workers is not None:
            workers.close()

    def __enter__(self) -> NeuronDecoder:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
