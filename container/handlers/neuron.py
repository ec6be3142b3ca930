"""Neuron runtime: a model compiled by neuron_emu (buckets, dynamic batching, custom ops), run on CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from container.handlers.base import MODEL_INPUTS, HandlerError, ModelInputs, RuntimeOptions
from container.manifest import Manifest
from neuron_emu.errors import NeuronEmuError
from neuron_emu.runtime import describe, dynamic_batch, error_message
from neuron_emu.runtime import load as load_traced

MAX_BATCH = 8


class NeuronHandler:
    def __init__(self) -> None:
        self._module: torch.jit.ScriptModule | None = None
        self._buckets: frozenset[int] = frozenset()

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        if manifest.compile is None:
            raise HandlerError("a neuron model's manifest must record how it was compiled (the compile section)")
        torch.set_num_threads(runtime.threads)
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
        self._module = module
        self._buckets = frozenset(manifest.sequence_buckets)
        # Run the smallest bucket once so a broken artifact fails at load, not on the first request.
        seq = min(self._buckets)
        ones = np.ones((1, seq), dtype=np.int64)
        self.predict({"input_ids": ones, "attention_mask": ones, "token_type_ids": np.zeros_like(ones)})

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, np.ndarray]:
        if self._module is None:
            raise HandlerError("predict() called before load()")
        arrays = [inputs[name] for name in MODEL_INPUTS]
        shape = arrays[0].shape
        if len(shape) != 2 or any(a.shape != shape for a in arrays):
            raise HandlerError(f"inputs must share one [batch, seq] shape, got {[a.shape for a in arrays]}")
        if not 1 <= shape[0] <= MAX_BATCH:
            raise HandlerError(f"batch size {shape[0]} is outside 1..{MAX_BATCH}")
        if shape[1] not in self._buckets:
            raise HandlerError(f"sequence length {shape[1]} is not one of the buckets {sorted(self._buckets)}")
        args = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)) for a in arrays]
        try:
            with torch.inference_mode():
                start, end = self._module(*args)
        except (
            RuntimeError,
            torch.jit.Error,
        ) as exc:  # TorchScript raises torch.jit.Error (not a RuntimeError)
            raise HandlerError(f"the Neuron model failed: {error_message(exc)}") from None
        return start.float().numpy(), end.float().numpy()
