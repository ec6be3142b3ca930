"""token-classification (NER): entities with character offsets, as transformers' TokenClassificationPipeline
answers with `aggregation_strategy="simple"` (the default here, as on Hugging Face's hosted inference): a list of
`{"entity_group", "score", "word", "start", "end"}` per text. `parameters.aggregation_strategy` picks none, simple,
first, average or max; `ignore_labels` (default ["O"]) drops labels.

A text longer than one window is split into windows that share `stride` tokens (default 128), and the entities of
overlapping windows are merged as the pipeline merges them when it is given a stride: nothing past the maximum
length is lost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from container.tasks.base import (
    BadParameters,
    BatchOutputs,
    Notes,
    Window,
    WindowOutputs,
    check_known,
    check_shapes,
    choice_parameter,
    int_parameter,
    text_input,
)
from container.tasks.entities import STRATEGIES, Grouper, merge_overlapping
from container.tasks.text import TextEncoder

PARAMETERS = ("aggregation_strategy", "ignore_labels", "stride")
DEFAULT_STRATEGY = "simple"
DEFAULT_STRIDE = 128


@dataclass(frozen=True)
class Params:
    strategy: str = DEFAULT_STRATEGY
    ignore_labels: frozenset[str] = field(default_factory=lambda: frozenset({"O"}))
    stride: int = DEFAULT_STRIDE


class TokenClassification:
    name = "token-classification"
    example = '{"inputs": "a text"} (or a list of texts)'

    def __init__(self, encoder: TextEncoder, labels: Sequence[str]) -> None:
        self.encoder = encoder
        self.buckets = encoder.buckets
        self.labels = list(labels)
        self.grouper = Grouper(encoder.tokenizer, self.labels)

    def parse_parameters(self, raw: Mapping[str, Any]) -> Params:
        check_known(raw, PARAMETERS, self.name)
        strategy = choice_parameter(raw, "aggregation_strategy", DEFAULT_STRATEGY, STRATEGIES) or DEFAULT_STRATEGY
        ignore = raw.get("ignore_labels", ["O"])
        if not isinstance(ignore, list) or not all(isinstance(label, str) for label in ignore):
            raise BadParameters("parameter 'ignore_labels' must be a list of label names")
        stride = int_parameter(
            raw, "stride", min(DEFAULT_STRIDE, self.encoder.max_length // 2), 0, self.encoder.max_length
        )
        return Params(strategy, frozenset(ignore), stride or 0)

    def parse_item(self, raw: Any, where: str) -> str:
        return text_input(raw, where)

    def item_chars(self, item: str) -> int:
        return len(item)

    def featurize(self, item: str, params: Params) -> list[Window]:
        return self.encoder.encode(item, windows=True, stride=params.stride).windows

    def filler_feature(self, bucket: int) -> Window:
        return self.encoder.filler(bucket)

    def check_outputs(self, outputs: BatchOutputs, batch: int, seq: int) -> None:
        check_shapes(outputs, [(batch, seq, len(self.labels))], "token logits")

    def decode(
        self, item: str, features: Sequence[Window], outputs: Sequence[WindowOutputs], params: Params
    ) -> list[dict[str, Any]]:
        entities: list[dict[str, Any]] = []
        for window, out in zip(features, outputs, strict=True):
            logits = out[0][: window.length].astype(np.float32)
            shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
            probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
            pre = self.grouper.pre_entities(item, window, probabilities)
            for entity in self.grouper.aggregate(pre, params.strategy):
                label = entity.get("entity_group", entity.get("entity"))
                if label not in params.ignore_labels:
                    entities.append(entity)
        if len(features) > 1:
            entities = merge_overlapping(entities)
        return [{**e, "score": float(e["score"])} for e in entities]

    def render(
        self, items: Sequence[str], results: Sequence[list[dict[str, Any]]], batch: bool, params: Params
    ) -> tuple[Any, Notes]:
        return (list(results) if batch else results[0]), Notes()
