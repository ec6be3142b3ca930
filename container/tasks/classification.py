"""text-classification: a label (or every label's score) per text or text pair, as transformers'
TextClassificationPipeline answers: `[{"label", "score"}]` for one text, one dict per text for a list, and with
`top_k` each input's labels sorted by score.

A text longer than the model's maximum is truncated (and the response says so), unless the request sets
`parameters.truncation: false`: then the text is split into overlapping windows and their scores are averaged (the
response says how many windows each input took).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from container.tasks.base import (
    BadInput,
    BatchOutputs,
    Notes,
    Window,
    WindowOutputs,
    bool_parameter,
    check_known,
    check_shapes,
    choice_parameter,
    int_parameter,
    kind_of,
    text_input,
)
from container.tasks.text import TextEncoder

FUNCTIONS = ("softmax", "sigmoid", "none")
PARAMETERS = ("top_k", "function_to_apply", "truncation", "max_length", "stride", "padding")
# Tokens consecutive windows share when a long text is windowed (truncation: false).
DEFAULT_STRIDE = 64
LEGACY = -1  # no top_k given: the pipeline's single-best answer shape


@dataclass(frozen=True)
class TextInput:
    text: str
    text_pair: str | None = None
    as_pair: bool = False  # sent as {"text", "text_pair"}: answered with a dict, not a list


@dataclass(frozen=True)
class Params:
    top_k: int | None = LEGACY  # LEGACY, None (every label) or a count
    function: str | None = None  # None: the model's default
    truncation: bool = True
    max_length: int | None = None
    stride: int = DEFAULT_STRIDE


@dataclass(frozen=True)
class Scores:
    values: np.ndarray  # float32 [labels]
    windows: int
    truncated: bool


def default_function(problem_type: str, labels: int) -> str:
    """The pipeline's default: none for regression, sigmoid for multi-label or one label, softmax otherwise."""
    if problem_type == "regression":
        return "none"
    if problem_type == "multi_label_classification" or labels == 1:
        return "sigmoid"
    return "softmax"


def apply(function: str, logits: np.ndarray) -> np.ndarray:
    if function == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    if function == "softmax":
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        return shifted / shifted.sum(axis=-1, keepdims=True)
    return logits


class TextClassification:
    name = "text-classification"
    example = '{"inputs": "a text"} (or a list of texts, or {"text", "text_pair"} objects)'

    def __init__(self, encoder: TextEncoder, labels: Sequence[str], problem_type: str) -> None:
        self.encoder = encoder
        self.buckets = encoder.buckets
        self.labels = list(labels)
        self.problem_type = problem_type
        self.function = default_function(problem_type, len(self.labels))

    def parse_parameters(self, raw: Mapping[str, Any]) -> Params:
        check_known(raw, PARAMETERS, self.name)
        top_k: int | None = LEGACY
        if "top_k" in raw:
            top_k = int_parameter(raw, "top_k", None, 1, 1_000_000)
        function = choice_parameter(raw, "function_to_apply", None, FUNCTIONS)
        return Params(
            top_k=top_k,
            function=function,
            truncation=bool_parameter(raw, "truncation", True),
            max_length=int_parameter(raw, "max_length", None, 4, self.encoder.max_length),
            stride=int_parameter(
                raw, "stride", min(DEFAULT_STRIDE, self.encoder.max_length // 2), 0, self.encoder.max_length
            )
            or 0,
        )

    def parse_item(self, raw: Any, where: str) -> TextInput:
        if isinstance(raw, str):
            return TextInput(text_input(raw, where))
        if isinstance(raw, dict):
            unknown = sorted(set(raw) - {"text", "text_pair"})
            if "text" not in raw or unknown:
                raise BadInput(
                    f"{where} must be a string or an object with 'text' (and optionally 'text_pair')"
                    + (f"; unknown field(s) {', '.join(unknown)}" if unknown else "")
                )
            pair = raw.get("text_pair")
            return TextInput(
                text_input(raw["text"], where, "'text'"),
                None if pair is None else text_input(pair, where, "'text_pair'"),
                as_pair=True,
            )
        raise BadInput(f"{where} must be a string or an object with 'text' and 'text_pair', got {kind_of(raw)}")

    def item_chars(self, item: TextInput) -> int:
        return len(item.text) + len(item.text_pair or "")

    def featurize(self, item: TextInput, params: Params) -> list[Window]:
        encoded = self.encoder.encode(
            item.text,
            item.text_pair,
            windows=not params.truncation,
            stride=params.stride,
            max_length=params.max_length,
        )
        return encoded.windows

    def filler_feature(self, bucket: int) -> Window:
        return self.encoder.filler(bucket)

    def check_outputs(self, outputs: BatchOutputs, batch: int, seq: int) -> None:
        check_shapes(outputs, [(batch, len(self.labels))], "classification logits")

    def decode(
        self, item: TextInput, features: Sequence[Window], outputs: Sequence[WindowOutputs], params: Params
    ) -> Scores:
        function = params.function or self.function
        scores = np.stack([apply(function, out[0].astype(np.float32)) for out in outputs])
        truncated = any(f.truncated for f in features)
        return Scores(scores.mean(axis=0).astype(np.float32), len(features), truncated)

    def render(
        self, items: Sequence[TextInput], results: Sequence[Scores], batch: bool, params: Params
    ) -> tuple[Any, Notes]:
        answers = [self._answer(scores, params) for scores in results]
        if batch:
            body: Any = answers
        elif params.top_k == LEGACY and not items[0].as_pair:
            body = [answers[0]]  # the pipeline answers a single text with a one-element list
        else:
            body = answers[0]
        return body, _notes(results, self.encoder.max_length, params.function or self.function, params)

    def _answer(self, scores: Scores, params: Params) -> Any:
        values = scores.values
        if params.top_k == LEGACY:
            best = int(values.argmax())
            return {"label": self.labels[best], "score": float(values[best])}
        ranked = sorted(range(len(values)), key=lambda i: -float(values[i]))  # stable: ties keep label order
        if params.top_k is not None:
            ranked = ranked[: params.top_k]
        return [{"label": self.labels[i], "score": float(values[i])} for i in ranked]


def _notes(results: Sequence[Scores], max_tokens: int, function: str, params: Params) -> Notes:
    truncated = sum(1 for r in results if r.truncated)
    windows = {i: r.windows for i, r in enumerate(results) if r.windows > 1}
    how = f"mean of the windows' scores ({function})" if windows else ""
    return Notes(truncated=truncated, max_tokens=params.max_length or max_tokens, windows=windows, pooling=how)
