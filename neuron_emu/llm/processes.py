"""The "processes" executor of a decoder: one worker process per rank, exchanging partial sums over gloo.

The workers are neuron_emu.parallel's (neuron_emu.parallel.group.WorkerGroup, settings `kind` "decoder"): forked
by the per-parent fork server, one intra-op thread each by default, gloo over the loopback interface only, each on
its own socket to the parent. Each loads its rank's weights from the decoder's saved directory and holds its KV
cache (neuron_emu.llm.rank); per step the parent sends every rank the graph kind, the bucket, the token ids and
positions and the line or mask inputs (a few hundred bytes), and rank 0 answers with the logits. The lifecycle is
the worker group's: `close()` asks the workers to stop and returns once they have exited; a worker that dies (or
a step that gets no answer within `step_timeout_s`) stops the others, and that call and every later one raise one
line (`ArtifactError`) naming it; the workers die with this process (their sockets reach EOF, the fork server
exits and Linux's parent-death signal ends them).
Stand-in: NeuronCores and NeuronLink are emulated by CPU processes and gloo all-reduces over loopback.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.parallel.group import DEFAULT_COLLECTIVE_TIMEOUT_S, DEFAULT_START_TIMEOUT_S, WorkerGroup

Tensor = torch.Tensor
PREFIX = "neuron_emu.parallel: "


def _relabel(exc: ArtifactError) -> ArtifactError:
    return ArtifactError("neuron_emu.llm: " + str(exc).removeprefix(PREFIX))


def _stop(group: WorkerGroup, scratch: Path | None) -> None:
    try:
        group.close()
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


class DecoderWorkers:
    """The worker processes of one decoder saved in `directory` (`rank_files`: its per-rank weight files), started
    here; `scratch`, if given, is removed once they have stopped (a compiled decoder saved there to start them)."""

    def __init__(
        self,
        directory: Path,
        rank_files: Sequence[Path],
        *,
        scratch: Path | None = None,
        threads_per_worker: int = 1,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S,
        step_timeout_s: float | None = None,
    ) -> None:
        self.step_timeout_s = step_timeout_s
        self.group = WorkerGroup(
            rank_files,
            threads=threads_per_worker,
            start_timeout_s=start_timeout_s,
            collective_timeout_s=collective_timeout_s,
            kind="decoder",
            extra={"directory": str(directory)},
        )
        # Interpreter exit (or the decoder dropped unclosed) stops the workers too.
        self._finalizer = weakref.finalize(self, _stop, self.group, scratch)
        try:
            self.group.start()
        except ArtifactError as exc:
            self.close()
            raise _relabel(exc) from None
        except BaseException:
            self.close()
            raise

    @property
    def pids(self) -> list[int]:
        """The workers' pids in rank order, while they run."""
        return self.group.pids if self.group.running else []

    def step(
        self,
        kind: str,
        bucket: int,
        ids: Tensor,
        positions: Tensor,
        where: tuple[Tensor, ...],
        head: tuple[Tensor, ...],
    ) -> Tensor:
        """Run one step on every worker: rank 0's float32 logits."""
        payload: tuple[Any, ...] = (
            kind, bucket, ids.numpy(), positions.numpy(), [w.numpy() for w in where], [h.numpy() for h in head],
        )  # fmt: skip
        try:
            logits, _ = self.group.request(payload, self.step_timeout_s)
        except ArtifactError as exc:
            raise _relabel(exc) from None
        return torch.from_numpy(logits)

    def become(self, uid: int, gid: int) -> None:
        """Every worker (and the fork server) takes uid/gid, as a server that loaded the model as root does."""
        try:
            self.group.become(uid, gid)
        except ArtifactError as exc:
            raise _relabel(exc) from None

    def close(self) -> None:
        """Stop the workers (waiting until they have exited) and remove the scratch directory; idempotent."""
        self._finalizer()
