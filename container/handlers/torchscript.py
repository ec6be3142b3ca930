"""TorchScript runtime: a traced, frozen module returning its task's outputs (a tensor or a tuple of them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from container.handlers.base import MODEL_INPUTS, HandlerError, ModelInputs, RuntimeOptions
from container.manifest import Manifest


class TorchScriptHandler:
    def __init__(self) -> None:
        self._module: torch.jit.ScriptModule | None = None

    def load(self, model_dir: Path, manifest: Manifest, runtime: RuntimeOptions) -> None:
        torch.set_num_threads(runtime.threads)
        torch.set_flush_denormal(runtime.flush_denormals)
        engine = manifest.quantization.engine if manifest.quantization else None
        if engine:
            # Quantized weights are repacked for the current engine at load: use the one they were made for.
            if engine not in torch.backends.quantized.supported_engines:
                raise HandlerError(f"this torch build lacks the {engine!r} quantized engine the model needs")
            torch.backends.quantized.engine = engine
        try:
            module = torch.jit.load(str(model_dir / manifest.model_file), map_location="cpu")
        except (RuntimeError, ValueError) as exc:
            raise HandlerError(f"TorchScript cannot load {manifest.model_file}: {str(exc).splitlines()[0]}") from None
        module.eval()
        self._module = module

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, ...]:
        if self._module is None:
            raise HandlerError("predict() called before load()")
        args = [torch.from_numpy(inputs[name]) for name in MODEL_INPUTS]
        with torch.inference_mode():
            outputs = self._module(*args)
        return as_arrays(outputs)


def as_arrays(outputs: object) -> tuple[np.ndarray, ...]:
    """A module's tensor, or tuple/list of tensors, as float32 NumPy arrays."""
    tensors = outputs if isinstance(outputs, tuple | list) else (outputs,)
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise HandlerError(f"the model returned {type(outputs).__name__}, not tensors")
    return tuple(t.float().numpy() for t in tensors)
