"""The one interface every model runtime implements: `load()` then `predict()`; precision is its own business."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from container.manifest import Manifest

# Positional input order of every graph Sagebox exports (a graph may ignore token_type_ids).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# A batch of same-length features: input_ids, attention_mask, token_type_ids, each int64 [batch, seq].
ModelInputs = dict[str, np.ndarray]


class HandlerError(RuntimeError):
    """A model the handler cannot load or run."""


class Handler(Protocol):
    def load(self, model_dir: Path, manifest: Manifest, threads: int) -> None:
        """Load the model named by the (already verified) manifest, using `threads` intra-op threads."""
        ...

    def predict(self, inputs: ModelInputs) -> tuple[np.ndarray, np.ndarray]:
        """Return float32 start and end logits, each [batch, seq]."""
        ...
