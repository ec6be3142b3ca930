"""Calibration batches: real inputs (questions with contexts, texts) featurized exactly as the server does."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from container.handlers.base import MODEL_INPUTS, ModelInputs
from container.qa import QAProcessor
from container.tasks import InputTooLong, ModelFeature, Task
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import QAExample


def processor_for(model_dir: Path, buckets: list[int], doc_stride: int = 128) -> QAProcessor:
    return QAProcessor.from_file(str(model_dir / "tokenizer.json"), buckets, doc_stride, 30)


def stack(features: Sequence[ModelFeature]) -> ModelInputs:
    return {
        "input_ids": np.stack([f.input_ids for f in features]),
        "attention_mask": np.stack([f.attention_mask for f in features]),
        "token_type_ids": np.stack([f.token_type_ids for f in features]),
    }


def calibration_batches(
    examples: Iterable[QAExample], processor: QAProcessor, batches: int, batch_size: int = 1
) -> list[ModelInputs]:
    """Up to `batches` same-bucket batches of question-answering windows, in data order; fewer if the data runs out
    (never zero)."""

    def windows() -> Iterator[Sequence[ModelFeature]]:
        for example in examples:
            try:
                yield processor.featurize(example.question, example.context)
            except InputTooLong:
                continue

    return _batches(windows(), batches, batch_size)


def task_calibration_batches(items: Iterable[Any], task: Task, batches: int, batch_size: int = 1) -> list[ModelInputs]:
    """The same for any task's inputs (texts, text pairs, questions), featurized with the default parameters."""
    params = task.parse_parameters({})

    def windows() -> Iterator[Sequence[ModelFeature]]:
        for item in items:
            try:
                yield task.featurize(item, params)
            except InputTooLong:
                continue

    return _batches(windows(), batches, batch_size)


def _batches(windows: Iterable[Sequence[ModelFeature]], batches: int, batch_size: int) -> list[ModelInputs]:
    if batches < 1 or batch_size < 1:
        raise SageboxError("calibration needs at least one batch of at least one example")
    out: list[ModelInputs] = []
    pending: dict[int, list[ModelFeature]] = defaultdict(list)
    for features in windows:
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
        raise SageboxError("the calibration data yields no model input (every input is too long)")
    return out


def as_torch_args(inputs: ModelInputs) -> tuple[object, ...]:
    import torch

    return tuple(torch.from_numpy(inputs[name]) for name in MODEL_INPUTS)
