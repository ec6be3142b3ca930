"""The tasks a model directory can serve, and the one that serves a given manifest."""

from __future__ import annotations

from pathlib import Path

from container.manifest import Manifest
from container.tasks.base import (
    BadInput,
    BadParameters,
    BatchOutputs,
    InputTooLong,
    ModelFeature,
    ModelInputs,
    Notes,
    Task,
    WindowOutputs,
)


def task_for(manifest: Manifest, model_dir: Path, *, doc_stride: int = 128, max_answer_tokens: int = 30) -> Task:
    """The task object for a verified manifest, with the model directory's tokenizer."""
    tokenizer = str(model_dir / manifest.tokenizer.file)
    buckets = manifest.sequence_buckets
    if manifest.task == "question-answering":
        from container.qa import QAProcessor
        from container.tasks.question_answering import QuestionAnswering

        return QuestionAnswering(QAProcessor.from_file(tokenizer, buckets, doc_stride, max_answer_tokens))
    from container.tasks.text import TextEncoder

    lowercase = manifest.pooling.lowercase if manifest.pooling is not None else False
    encoder = TextEncoder.from_file(tokenizer, buckets, manifest.tokenizer.max_length, lowercase)
    if manifest.task == "text-classification":
        from container.tasks.classification import TextClassification

        assert manifest.labels is not None and manifest.problem_type is not None  # the manifest checks both
        return TextClassification(encoder, manifest.labels, manifest.problem_type)
    if manifest.task == "token-classification":
        from container.tasks.token_classification import TokenClassification

        assert manifest.labels is not None
        return TokenClassification(encoder, manifest.labels)
    from container.tasks.embeddings import FeatureExtraction

    assert manifest.pooling is not None
    return FeatureExtraction(encoder, manifest.pooling)


__all__ = [
    "BadInput",
    "BadParameters",
    "BatchOutputs",
    "InputTooLong",
    "ModelFeature",
    "ModelInputs",
    "Notes",
    "Task",
    "WindowOutputs",
    "task_for",
]
