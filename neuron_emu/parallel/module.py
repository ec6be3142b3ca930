"""`ParallelModel`: a tensor-parallel BERT-family model served by one worker process per emulated NeuronCore.

Called like the module `neuron_emu.trace` returns for the same model: `model(input_ids, attention_mask[,
token_type_ids])` (the inputs it was traced with) returns a Tensor if the model returns one, else a tuple of
Tensors (a Hugging Face ModelOutput's values in order): `(start_logits, end_logits)` for a QA model, `(logits,)`
for a classifier with return_dict=False, `(last_hidden_state, pooler_output)` for a BertModel, an embedding
wrapper's Tensor, ... Models saved in format 1 (QA only) return `(start_logits, end_logits)` as before.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuron_emu.errors import ArtifactError
from neuron_emu.parallel.artifact import (
    PLAN_FILE,
    Manifest,
    rank_file,
    read_manifest,
    write_artifact,
    write_manifest,
)
from neuron_emu.parallel.cost import ParallelPlan
from neuron_emu.parallel.group import DEFAULT_START_TIMEOUT_S, WorkerGroup

Tensor = torch.Tensor


def _stop(group: WorkerGroup, scratch: Path | None) -> None:
    group.close()
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


class ParallelModel(torch.nn.Module):
    """N worker processes, one per rank, each running its shard of the traced graphs.

    Workers start on `start()`, on the first call, or at `load()`; `close()` (or leaving a `with` block, or the
    interpreter exiting) stops them. Calls are serialized: one request runs on all ranks at a time.
    """

    def __init__(
        self,
        manifest: Manifest,
        plan: ParallelPlan,
        *,
        directory: Path | None = None,
        shards: Sequence[torch.jit.ScriptModule] | None = None,
        threads_per_worker: int = 1,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        super().__init__()
        if directory is None and shards is None:
            raise ArtifactError("a ParallelModel needs a saved directory or the traced shards")
        self.manifest = manifest
        self.plan = plan
        self.directory = directory
        self._shards = list(shards) if shards is not None else None
        self.threads_per_worker = threads_per_worker
        self.start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._scratch: Path | None = None
        self._group: WorkerGroup | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self._closed = False
        self.last_timing: dict[str, Any] = {}

    @property
    def tp_degree(self) -> int:
        return self.manifest.tp_degree

    @property
    def worker_pids(self) -> list[int]:
        return list(self._group.pids) if self._group is not None and self._group.running else []

    @property
    def running(self) -> bool:
        return self._group is not None and self._group.running

    def become(self, uid: int, gid: int) -> None:
        """The worker processes (and their fork server) take uid/gid: a server that loaded the model as root and
        then dropped to a service user calls this so that no model code keeps running as root."""
        with self._lock:
            if self._group is None or not self._group.running:
                raise ArtifactError("neuron_emu.parallel: the workers are not running")
            self._group.become(uid, gid)

    def _files(self) -> Path:
        if self.directory is not None:
            return self.directory
        assert self._shards is not None
        self._scratch = Path(tempfile.mkdtemp(prefix="neuron_emu_parallel_model_"))
        write_artifact(self._scratch, self.manifest, self._shards, self.plan.to_json())
        return self._scratch

    def start(self) -> ParallelModel:
        """Start the workers (idempotent); returns self."""
        with self._lock:
            self._start_locked()
        return self

    def _start_locked(self) -> None:
        if self._closed:
            raise ArtifactError("neuron_emu.parallel: the model is closed; load it again")
        if self._group is not None:
            return
        files = self._files()
        group = WorkerGroup(
            [files / rank_file(rank) for rank in range(self.manifest.tp_degree)],
            head_inputs=self.manifest.head_takes_inputs,
            threads=self.threads_per_worker,
            start_timeout_s=self.start_timeout_s,
        )
        self._finalizer = weakref.finalize(self, _stop, group, self._scratch)
        self._group = group
        try:
            group.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the workers and delete scratch files; the model cannot run afterwards."""
        self._closed = True
        if self._finalizer is not None:
            self._finalizer()  # runs _stop once
        elif self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        self._group = None

    def __enter__(self) -> ParallelModel:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _check(self, inputs: Sequence[Tensor]) -> int:
        expected = self.manifest.input_shapes
        if len(inputs) != len(expected):
            names = ("input_ids", "attention_mask", "token_type_ids")[: len(expected)]
            raise ArtifactError(
                f"neuron_emu.parallel: the model takes {len(expected)} inputs ({', '.join(names)}), got {len(inputs)}"
            )
        batch = int(expected[0][0])
        for index, (x, shape, dtype) in enumerate(zip(inputs, expected, self.manifest.input_dtypes, strict=True)):
            if not isinstance(x, Tensor):
                raise ArtifactError(f"neuron_emu.parallel: input {index} is {type(x).__name__}, not a Tensor")
            if str(x.dtype).removeprefix("torch.") != dtype:
                raise ArtifactError(f"neuron_emu.parallel: input {index} has dtype {x.dtype}; traced with {dtype}")
            same_rest = list(x.shape[1:]) == shape[1:]
            if list(x.shape) != shape and not (self.manifest.dynamic_batch and x.dim() == len(shape) and same_rest):
                raise ArtifactError(
                    f"neuron_emu.parallel: input {index} has shape {list(x.shape)}; the model was traced for {shape}"
                    + ("" if self.manifest.dynamic_batch else " (enable dynamic_batch for other batch sizes)")
                )
        if len({int(x.shape[0]) for x in inputs}) != 1:
            raise ArtifactError("neuron_emu.parallel: the inputs disagree on the batch size")
        return batch

    def _run(
        self, arrays: list[np.ndarray], traced_batch: int
    ) -> tuple[list[np.ndarray], list[list[dict[str, float]]]]:
        """Rank 0's outputs for the whole request and every run's timings: one run at the traced batch size, else
        (dynamic batching) traced-size chunks, the last one padded with copies of its last row, joined along the
        batch dimension."""
        assert self._group is not None
        batch = arrays[0].shape[0]
        if batch == traced_batch:
            outputs, timing = self._group.run(arrays)
            return outputs, [timing]
        timings: list[list[dict[str, float]]] = []
        chunks: list[list[np.ndarray]] = []
        for first in range(0, batch, traced_batch):
            part = [a[first : first + traced_batch] for a in arrays]
            short = traced_batch - part[0].shape[0]
            if short:
                part = [np.concatenate([a, np.repeat(a[-1:], short, axis=0)]) for a in part]
            outputs, timing = self._group.run(part)
            chunks.append([o[: traced_batch - short] for o in outputs])
            timings.append(timing)
        return [np.concatenate([c[i] for c in chunks]) for i in range(len(chunks[0]))], timings

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        traced_batch = self._check(inputs)
        arrays = [x.detach().cpu().contiguous().numpy() for x in inputs]
        with self._lock:
            self._start_locked()
            began = time.perf_counter()
            outputs, timings = self._run(arrays, traced_batch)
            elapsed = time.perf_counter() - began
        self.last_timing = {"request_us": elapsed * 1e6, "chunks": timings}
        tensors = tuple(torch.from_numpy(o) for o in outputs)
        return tensors[0] if self.manifest.output_kind == "tensor" else tensors

    def dynamic_batch(self, enabled: bool = True) -> ParallelModel:
        """Accept any batch size (split into traced-size chunks, the last one padded); saved with the model.
        Needs every output to have the batch dimension first, as neuron_emu.dynamic_batch does."""
        if enabled and not self.manifest.batch_first_outputs:
            raise ArtifactError(
                "neuron_emu.parallel: dynamic batching needs every output to have the batch dimension first "
                f"(outputs {self.manifest.output_shapes} for inputs {self.manifest.input_shapes[0]})"
            )
        self.manifest = replace(self.manifest, dynamic_batch=enabled)
        if self.directory is not None:
            write_manifest(self.directory, self.manifest)
        return self

    def save(self, path: str | Path) -> Path:
        """Write the model directory (see neuron_emu.parallel.artifact); returns its path."""
        target = Path(path)
        if self._shards is not None:
            self.manifest = write_artifact(target, self.manifest, self._shards, self.plan.to_json())
            return target
        assert self.directory is not None
        if target.resolve() == self.directory.resolve():
            return target
        target.mkdir(parents=True, exist_ok=True)
        for name in self.manifest.files:
            shutil.copyfile(self.directory / name, target / name)
        write_manifest(target, self.manifest)
        return target

    def describe(self) -> dict[str, Any]:
        return {
            **self.manifest.to_dict(),
            "workers_running": self.running,
            "worker_pids": self.worker_pids,
            "plan_summary": list(self.plan.summary),
        }


def load(
    path: str | Path, *, threads_per_worker: int = 1, start_timeout_s: float = DEFAULT_START_TIMEOUT_S
) -> ParallelModel:
    """Load a saved tensor-parallel model and start its workers (one process per rank)."""
    directory = Path(path)
    manifest = read_manifest(directory)
    try:
        plan = ParallelPlan.from_dict(json.loads((directory / PLAN_FILE).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ArtifactError(f"cannot read {directory / PLAN_FILE}: {exc}") from None
    model = ParallelModel(
        manifest, plan, directory=directory, threads_per_worker=threads_per_worker, start_timeout_s=start_timeout_s
    )
    return model.start()
