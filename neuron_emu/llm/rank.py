"""One rank of a decoder in its own worker process (the "processes" executor): what the worker of
neuron_emu.parallel.worker holds and runs when its settings' `kind` is "decoder".

The worker loads the graphs, the replicated weights and its own shard from the decoder's directory, allocates its
KV cache (resident here, "on the device", until the worker stops) and runs each step the parent sends (graph kind,
bucket, token ids, positions, the line or mask inputs): the same `RankSet` code as the in-process executor, holding
one rank, its all-reduces gloo collectives among the workers (a sum, like NeuronLink's). Rank 0 runs the head and
returns the logits; the other ranks return nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuron_emu.llm.artifact import read_rank
from neuron_emu.llm.cache import DTYPES
from neuron_emu.llm.config import read_config
from neuron_emu.llm.runtime import RankSet, cache_shape, graph_spec
from neuron_emu.llm.shard import check_degree

Tensor = torch.Tensor


def _gloo_all_reduce(partials: Sequence[Tensor]) -> Tensor:
    import torch.distributed as dist

    (partial,) = partials
    partial = partial.contiguous()
    dist.all_reduce(partial)  # a sum over the workers, in place
    return partial


class DecoderRank:
    """Rank `rank` of `world` of the decoder saved in `directory`, its KV cache allocated (every line empty)."""

    def __init__(self, directory: str, rank: int, world: int) -> None:
        raw, settings, graphs, weights = read_rank(Path(directory), rank)
        config = read_config(raw["config"])
        layout = check_degree(config, settings.tp_degree, settings.instance_family)
        if layout.tp_degree != world:
            raise ValueError(f"the decoder has {layout.tp_degree} ranks, the worker group {world}")
        self.rank = rank
        self.ranks = RankSet(
            graph_spec(config, layout, settings.batch_size, settings.max_length),
            graphs,
            [weights],
            cache_shape(config, layout, settings.batch_size, settings.max_length),
            DTYPES[settings.cache_dtype],
            all_reduce=_gloo_all_reduce if world > 1 else None,
            head=rank == 0,
        )

    def step(self, payload: Any) -> np.ndarray | None:
        """Run one step: `payload` is (kind, bucket, ids, positions, where arrays, head arrays); rank 0's logits."""
        kind, bucket, ids, positions, where, head = payload
        logits = self.ranks.step(
            str(kind),
            int(bucket),
            torch.from_numpy(ids),
            torch.from_numpy(positions),
            tuple(torch.from_numpy(a) for a in where),
            tuple(torch.from_numpy(a) for a in head),
        )
        return None if logits is None else logits.contiguous().numpy()
