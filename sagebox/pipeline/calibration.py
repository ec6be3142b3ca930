"""Calibration batches: real (question, context) pairs featurized exactly as the server featurizes them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from container.handlers.base import MODEL_INPUTS, ModelInputs
from container.qa import Feature, InputTooLong, QAProcessor
from sagebox.errors import SageboxError
from sagebox.pipeline.squad import QAExample


def processor_for(model_dir: Path, buckets: list[int], doc_stride: int = 128) -> QAProcessor:
    return QAProcessor.from_file(str(model_dir / "tokenizer.json"), buckets, doc_stride, 30)


def stack(features: list[Feature]) -> ModelInputs:
    return {
        "input_ids": np.stack([f.input_ids for f in features]),
        "attention_mask": np.stack([f.attention_mask for f in features]),
        "token_type_ids": np.stack([f.token_type_ids for f in features]),
    }


def calibration_batches(
    examples: Iterable[QAExample], processor: QAProcessor, batches: int, batch_size: int = 1
) -> list[ModelInputs]:
    """Up to `batches` same-bucket batches, in data order; fewer if the data runs out (never zero)."""
    if batches < 1 or batch_size < 1:
        raise SageboxError("calibration needs at least one batch of at least one example")
    out: list[ModelInputs] = []
    pending: dict[int, list[Feature]] = defaultdict(list)
    for example in examples:
        try:
            features = processor.featurize(example.question, example.context)
        except InputTooLong:
            continue
        for feature in features:
            group = pending[feature.bucket]
            group.append(feature)
            if len(group) == batch_size:
                out.append(stack(group))
                pending[feature.bucket] = []
                if len(out) == batches:
                    return out
    for group in pending.values():
        if group and len(out) < batches:
            out.append(stack(group))
    if not out:
        raise SageboxError("the calibration data yields no model input (every question is too long)")
    return out


def as_torch_args(inputs: ModelInputs) -> tuple[object, ...]:
    import torch

    return tuple(torch.from_numpy(inputs[name]) for name in MODEL_INPUTS)
