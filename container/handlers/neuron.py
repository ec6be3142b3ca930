"""Neuron runtime: a model compiled for NeuronCores, by one of two backends (the manifest's `compile.backend`).

- `neuron_emu`: Sagebox's emulator. One TorchScript file with a graph per sequence bucket (dynamic batching,
  custom ops), run on the host CPU: it serves anywhere, and on an inf2/trn1 instance it is CPU inference.
- `torch_neuronx`: AWS's compiler. One file per sequence bucket (NEURONX_FILE), each what `torch_neuronx.trace`
  returned for that bucket with `torch_neuronx.dynamic_batch` applied, saved by `torch.jit.save`. Loading one
  needs `torch_neuronx` imported first (it registers the Neuron ops the saved graphs call) and running one needs
  NeuronCores: the Neuron image on an inf2/trn1 instance.

A neuron_emu model compiled with tensor parallelism (`compile.tensor_parallel` N > 1, `sagebox compile
--tensor-parallel N`) holds one `neuron_emu.parallel` directory per sequence bucket (PARALLEL_DIR). Each is loaded
with `neuron_emu.parallel.load`: N worker processes per bucket (the stand-in for N NeuronCores joined by
NeuronLink), each with its share of the runtime's intra-op threads. `close()` stops them; so does the interpreter's
exit (neuron_emu.parallel registers a finalizer) and, if this process is killed, the workers' own parent-death
handling.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from container.handlers.base import MODEL_INPUTS, HandlerError, ModelInputs, RuntimeOptions
from container.handlers.torchscript import as_arrays
from container.manifest import Manifest
from neuron_emu.errors import NeuronEmuError
from neuron_emu.runtime import describe, dynamic_batch, error_message
from neuron_emu.runtime import load as load_traced

log = logging.getLogger("sagebox.handler.neuron")

MAX_BATCH = 8
# The directory of one sequence bucket of a tensor-parallel neuron_emu artifact (a neuron_emu.parallel save); the
# manifest's model_file is the smallest bucket's PARALLEL_MANIFEST inside it.
PARALLEL_DIR = "tp/seq{bucket}"
PARALLEL_MANIFEST = "parallel.json"
# The file of one sequence bucket of a torch_neuronx artifact; the manifest's model_file is the smallest bucket's.
NEURONX_FILE = "model.neuronx.seq{bucket}.pt"
NEURONX_MISSING = (
    "this model was compiled by torch-neuronx and needs a Neuron host (the Neuron image: container/Dockerfile.neuron "
    "on an inf2/trn1 instance): torch_neuronx cannot be imported here"
)


def neuronx_bucket_file(bucket: int) -> str:
    """The file name of one sequence bucket's graph in a torch_neuronx model directory."""
    return NEURONX_FILE.format(bucket=bucket)


def parallel_bucket_dir(bucket: int) -> str:
    """The directory of one sequence bucket's sharded graphs in a tensor-parallel neuron_emu model directory."""
    return PARALLEL_DIR.format(bucket=bucket)


def parallel_model_file(bucket: int) -> str:
    """The neuron_emu.parallel manifest of one bucket's directory, as the model manifest lists it."""
    return f"{parallel_bucket_dir(bucket)}/{PARALLEL_MANIFEST}"


def threads_per_worker(runtime_threads: int, degree: int) -> int:
    """Intra-op threads of each of `degree` workers: together no more than the runtime's threads, at least 1."""
    return max(1, runtime_threads // max(1, degree))


def import_torch_neuronx() -> Any:
    """AWS's torch_neuronx module, or one HandlerError line saying this host cannot run the model."""
    try:
        return importlib.import_module("torch_neuronx")
    except ImportError:
        raise HandlerError(NEURONX_MISSING) from None


def _check_parallel(model: Any, bucket: int, degree: int) -> None:
    """A bucket's sharded model matches the manifest: its degree and its traced sequence length."""
    where = parallel_bucket_dir(bucket)
    if model.tp_degree != degree:
        raise HandlerError(
            f"{where} is sharded over {model.tp_degree} cores; the manifest says tensor_parallel {degree}"
        )
    traced = int(model.manifest.input_shapes[0][1])
    if traced != bucket:
        raise HandlerError(f"{where} was traced for sequence length {traced}, not {bucket}")
    if not model.manifest.dynamic_batch:
        # Enabled in memory only: ParallelModel.dynamic_batch() would rewrite the verified parallel.json on disk.
        model.manifest = replace(model.manifest, dynamic_batch=True)


class NeuronHandler:
    def __init__(self) -> None:
        # One callable per sequence bucket (the emulator's single module serves every bucket itself).
        self._graphs: dict[int, Any] = {}
        # Tensor-parallel models whose worker processes this handler started (closed by close()).
        self._parallel: list[Any] = []

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        if manifest.compile is None:
            raise HandlerError("a neuron model's manifest must record how it was compiled (the compile section)")
        self.close()  # a handler loaded twice stops the first model's workers
        torch.set_num_threads(runtime.threads)
        if manifest.compile.backend == "torch_neuronx":
            graphs = self._load_neuronx(model_dir, manifest)
        elif manifest.compile.tensor_parallel > 1:
            graphs = self._load_parallel(model_dir, manifest, runtime)
        else:
            graphs = self._load_emulated(model_dir, manifest)
        self._graphs = graphs
        # Run the smallest bucket once so a broken artifact fails at load, not on the first request.
        seq = min(self._graphs)
        ones = np.ones((1, seq), dtype=np.int64)
        try:
            self.predict({"input_ids": ones, "attention_mask": ones, "token_type_ids": np.zeros_like(ones)})
        except BaseException:
            self.close()
            raise

    @property
    def worker_pids(self) -> list[int]:
        """The running tensor-parallel worker processes (bucket by bucket, rank order); empty for single-core."""
        return [pid for model in self._parallel for pid in model.worker_pids]

    def serve_as(self, uid: int, gid: int) -> None:
        """The tensor-parallel worker processes take uid/gid, as the server does once the model is loaded."""
        for model in self._parallel:
            try:
                model.become(uid, gid)
            except NeuronEmuError as exc:
                raise HandlerError(f"the tensor-parallel workers could not drop to uid {uid}: {exc}") from None
        if self._parallel:
            log.info("tensor-parallel worker process(es) %s now run as uid %d", self.worker_pids, uid)

    def close(self) -> None:
        """Stop the worker processes of a tensor-parallel model (nothing to do for single-core graphs)."""
        models, self._parallel = self._parallel, []
        self._graphs = {}
        pids = [pid for model in models for pid in model.worker_pids]
        for model in models:
            model.close()  # returns once its workers have exited (neuron_emu kills them after 30 s)
        if pids:
            log.info("stopped %d tensor-parallel worker process(es)", len(pids))

    @staticmethod
    def _load_emulated(model_dir: Path, manifest: Manifest) -> dict[int, Any]:
        assert manifest.compile is not None
        libraries = [model_dir / name for name in manifest.compile.custom_op_libraries]
        try:
            module = load_traced(model_dir / manifest.model_file, custom_op_libraries=list(libraries))
            info = describe(module)
            if not info["dynamic_batch"]:
                dynamic_batch(module)
        except NeuronEmuError as exc:
            raise HandlerError(f"the Neuron model cannot be loaded: {exc}") from None
        compiled = set(info["buckets"]) or {shape[0][1] for shape in info["input_shapes"] if len(shape[0]) > 1}
        missing = sorted(set(manifest.sequence_buckets) - compiled)
        if missing:
            raise HandlerError(
                f"the manifest lists sequence buckets {missing} the Neuron model was not compiled for "
                f"(it has {sorted(compiled)})"
            )
        return dict.fromkeys(manifest.sequence_buckets, module)

    def _load_parallel(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> dict[int, Any]:
        from neuron_emu import parallel

        assert manifest.compile is not None
        degree = manifest.compile.tensor_parallel
        missing = [b for b in manifest.sequence_buckets if parallel_model_file(b) not in manifest.files]
        if missing:
            raise HandlerError(
                f"the manifest records tensor_parallel {degree} but lists no sharded graphs for sequence buckets "
                f"{missing} ({', '.join(parallel_bucket_dir(b) for b in missing)})"
            )
        threads = threads_per_worker(runtime.threads, degree)
        graphs: dict[int, Any] = {}
        try:
            for bucket in manifest.sequence_buckets:
                model = parallel.load(model_dir / parallel_bucket_dir(bucket), threads_per_worker=threads)
                self._parallel.append(model)
                _check_parallel(model, bucket, degree)
                graphs[bucket] = model
        except NeuronEmuError as exc:
            self.close()
            raise HandlerError(f"the tensor-parallel Neuron model cannot be loaded: {exc}") from None
        except BaseException:
            self.close()
            raise
        log.info(
            "tensor parallel %d: %d worker process(es) per bucket, %d intra-op thread(s) each, buckets %s",
            degree,
            degree,
            threads,
            sorted(graphs),
        )
        return graphs

    @staticmethod
    def _load_neuronx(model_dir: Path, manifest: Manifest) -> dict[int, Any]:
        neuronx = import_torch_neuronx()
        missing = [b for b in manifest.sequence_buckets if neuronx_bucket_file(b) not in manifest.files]
        if missing:
            raise HandlerError(
                f"the manifest lists sequence buckets {missing} without their torch-neuronx graphs "
                f"({', '.join(neuronx_bucket_file(b) for b in missing)})"
            )
        graphs: dict[int, Any] = {}
        for bucket in manifest.sequence_buckets:
            name = neuronx_bucket_file(bucket)
            try:
                module = torch.jit.load(str(model_dir / name))
            except (RuntimeError, ValueError) as exc:
                raise HandlerError(f"torch-neuronx cannot load {name}: {error_message(exc)}") from None
            # Compilation enabled dynamic batching; enabling it again after the load is harmless and does not
            # depend on whether the setting survives torch.jit.save (not verified on hardware).
            graphs[bucket] = neuronx.dynamic_batch(module)
        return graphs

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, ...]:
        if not self._graphs:
            raise HandlerError("predict() called before load()")
        arrays = [inputs[name] for name in MODEL_INPUTS]
        shape = arrays[0].shape
        if len(shape) != 2 or any(a.shape != shape for a in arrays):
            raise HandlerError(f"inputs must share one [batch, seq] shape, got {[a.shape for a in arrays]}")
        if not 1 <= shape[0] <= MAX_BATCH:
            raise HandlerError(f"batch size {shape[0]} is outside 1..{MAX_BATCH}")
        graph = self._graphs.get(shape[1])
        if graph is None:
            raise HandlerError(f"sequence length {shape[1]} is not one of the buckets {sorted(self._graphs)}")
        args = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in arrays]
        try:
            with torch.inference_mode():
                outputs = graph(*args)
        except (
            RuntimeError,
            torch.jit.Error,
        ) as exc:  # TorchScript raises torch.jit.Error (not a RuntimeError)
            raise HandlerError(f"the Neuron model failed: {error_message(exc)}") from None
        except NeuronEmuError as exc:  # a tensor-parallel worker that died, or inputs its graphs refuse
            raise HandlerError(f"the Neuron model failed: {exc}") from None
        return as_arrays(outputs)
