"""ONNX Runtime: an exported (optionally quantized) graph with inputs named like the tokenizer's outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from container.handlers.base import HandlerError, ModelInputs
from container.manifest import Manifest


class OnnxRuntimeHandler:
    def __init__(self) -> None:
        self._session: ort.InferenceSession | None = None
        self._input_names: list[str] = []

    def load(self, model_dir: Path, manifest: Manifest, threads: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning threads burn the CPUs that tokenization and the HTTP loop need between batches.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = ort.InferenceSession(
                str(model_dir / manifest.model_file), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped exceptions
            raise HandlerError(f"ONNX Runtime cannot load {manifest.model_file}: {str(exc).splitlines()[0]}") from None
        self._input_names = [i.name for i in self._session.get_inputs()]

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, np.ndarray]:
        if self._session is None:
            raise HandlerError("predict() called before load()")
        feed = {name: inputs[name] for name in self._input_names}
        start, end = self._session.run(None, feed)[:2]
        return np.asarray(start, dtype=np.float32), np.asarray(end, dtype=np.float32)
