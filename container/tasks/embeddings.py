"""feature-extraction: one sentence embedding per text (a list of floats), pooled as the model's
sentence-transformers modules declare (mean pooling otherwise) and L2-normalised when the model's modules say so
(`parameters.normalize` overrides). A text longer than the model's maximum sequence length is truncated there, as
sentence-transformers truncates it, and the response says so in a header.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from container.manifest import PoolingSpec
from container.tasks.base import (
    BadParameters,
    BatchOutputs,
    Notes,
    Window,
    WindowOutputs,
    bool_parameter,
    check_known,
    check_shapes,
    text_input,
)
from container.tasks.text import TextEncoder

PARAMETERS = ("normalize", "truncation", "truncate")


@dataclass(frozen=True)
class Params:
    normalize: bool


@dataclass(frozen=True)
class Embedding:
    values: np.ndarray  # float32 [dimension]
    truncated: bool


class FeatureExtraction:
    name = "feature-extraction"
    example = '{"inputs": "a text"} (or a list of texts)'

    def __init__(self, encoder: TextEncoder, pooling: PoolingSpec) -> None:
        self.encoder = encoder
        self.buckets = encoder.buckets
        self.pooling = pooling

    def parse_parameters(self, raw: Mapping[str, Any]) -> Params:
        check_known(raw, PARAMETERS, self.name)
        for name in ("truncation", "truncate"):  # accepted for clients that send them; truncating is the only mode
            if name in raw and raw[name] is not True:
                raise BadParameters(
                    f"parameter {name!r} can only be true: embeddings are computed on at most "
                    f"{self.encoder.max_length} tokens (split longer texts yourself)"
                )
        return Params(bool_parameter(raw, "normalize", self.pooling.normalize))

    def parse_item(self, raw: Any, where: str) -> str:
        return text_input(raw, where)

    def item_chars(self, item: str) -> int:
        return len(item)

    def featurize(self, item: str, params: Params) -> list[Window]:
        return self.encoder.encode(item).windows

    def filler_feature(self, bucket: int) -> Window:
        return self.encoder.filler(bucket)

    def check_outputs(self, outputs: BatchOutputs, batch: int, seq: int) -> None:
        check_shapes(outputs, [(batch, self.pooling.dimension)], "sentence embeddings")

    def decode(
        self, item: str, features: Sequence[Window], outputs: Sequence[WindowOutputs], params: Params
    ) -> Embedding:
        vector = outputs[0][0].astype(np.float32)
        if params.normalize:
            norm = float(np.linalg.norm(vector))
            vector = vector / max(norm, 1e-12)  # sentence-transformers' Normalize: F.normalize(eps=1e-12)
        return Embedding(vector, features[0].truncated)

    def render(
        self, items: Sequence[str], results: Sequence[Embedding], batch: bool, params: Params
    ) -> tuple[Any, Notes]:
        vectors = [r.values.tolist() for r in results]
        truncated = sum(1 for r in results if r.truncated)
        return (vectors if batch else vectors[0]), Notes(truncated=truncated, max_tokens=self.encoder.max_length)
