"""What every task shares: the model inputs of one window, the task interface the service drives, and request
parameters checked in one place.

A task turns one request input into model windows (`featurize`), checks what the model returned for a batch of
windows (`check_outputs`), and turns each input's window outputs into its answer (`decode`); `render` shapes the
answers as the matching Hugging Face pipeline does. Pure logic over a `tokenizers.Tokenizer`: no model, no HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from container.errors import ContainerError

# A batch of same-bucket windows: input_ids, attention_mask, token_type_ids, each int64 [batch, seq].
ModelInputs = dict[str, np.ndarray]
# What the model returned for one batch (float32 arrays, batch first), and for one window (its rows).
BatchOutputs = tuple[np.ndarray, ...]
WindowOutputs = tuple[np.ndarray, ...]


class InputTooLong(ContainerError, ValueError):
    """An input the model cannot take in any window (e.g. a question that alone fills the largest bucket)."""


class BadParameters(ContainerError, ValueError):
    """A request's `parameters` the task does not accept (400)."""


class BadInput(ContainerError, ValueError):
    """A request input of the wrong shape for the task (400); the message names the item."""


class ModelFeature(Protocol):
    """One model input window, padded to its bucket: what the predictor stacks into a model call."""

    @property
    def input_ids(self) -> np.ndarray: ...

    @property
    def attention_mask(self) -> np.ndarray: ...

    @property
    def token_type_ids(self) -> np.ndarray: ...

    @property
    def bucket(self) -> int: ...


@dataclass(frozen=True)
class Window:
    """One window of a text task: the padded model inputs and what decoding needs of its tokens."""

    input_ids: np.ndarray  # int64 [bucket]
    attention_mask: np.ndarray  # int64 [bucket]
    token_type_ids: np.ndarray  # int64 [bucket]
    length: int  # tokens before padding
    # Per unpadded token: character span in the text, whether the tokenizer added it, the token string.
    offsets: tuple[tuple[int, int], ...] = ()
    special: tuple[bool, ...] = ()
    tokens: tuple[str, ...] = ()
    ids: tuple[int, ...] = ()
    truncated: bool = False  # tokens past this window's end were dropped (the response says so)

    @property
    def bucket(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True)
class Notes:
    """What the server says about how it answered, beside the answer (response headers)."""

    truncated: int = 0  # inputs cut at the model's maximum length
    max_tokens: int = 0
    windows: dict[int, int] = field(default_factory=dict)  # input index -> windows pooled (more than one)
    pooling: str = ""

    def headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.truncated:
            out[TRUNCATED_HEADER] = f"{self.truncated} input(s) truncated to {self.max_tokens} tokens"
        if self.windows:
            counts = ", ".join(f"input {i}: {n} windows" for i, n in sorted(self.windows.items()))
            out[POOLING_HEADER] = f"{self.pooling} ({counts})"
        return out


TRUNCATED_HEADER = "X-Sagebox-Truncated"
POOLING_HEADER = "X-Sagebox-Pooling"


class Task(Protocol):
    """The sequence the service runs for any task, in the order it runs it."""

    name: str
    buckets: list[int]

    def parse_parameters(self, raw: Mapping[str, Any]) -> Any:
        """The request's `parameters`, checked (BadParameters names what is wrong)."""
        ...

    def parse_item(self, raw: Any, where: str) -> Any:
        """One request input, checked (BadInput names `where`)."""
        ...

    def item_chars(self, item: Any) -> int:
        """Characters of text in the input: what admission prices before tokenizing."""
        ...

    def featurize(self, item: Any, params: Any) -> Sequence[ModelFeature]:
        """The input's model windows (at least one), or InputTooLong."""
        ...

    def filler_feature(self, bucket: int) -> ModelFeature:
        """A window filling `bucket` with real vocabulary ids: exercises the graph at its full shape."""
        ...

    def check_outputs(self, outputs: BatchOutputs, batch: int, seq: int) -> None:
        """Raise ValueError unless the model's outputs for a [batch, seq] call have this task's shapes."""
        ...

    def decode(self, item: Any, features: Sequence[Any], outputs: Sequence[WindowOutputs], params: Any) -> Any:
        """The input's answer from its windows' outputs."""
        ...

    def render(self, items: Sequence[Any], results: Sequence[Any], batch: bool, params: Any) -> tuple[Any, Notes]:
        """The response body's JSON value for `results` (one per input of `items`, in order; `batch` if the caller
        sent a list), shaped as the matching transformers pipeline returns it, and notes for the response headers."""
        ...


def check_shapes(outputs: BatchOutputs, expected: Sequence[tuple[int, ...]], what: str) -> None:
    """The model returned `len(expected)` finite arrays of exactly these shapes."""
    shapes = [tuple(o.shape) for o in outputs]
    if shapes != [tuple(e) for e in expected]:
        raise ValueError(f"model returned {what} of shape(s) {shapes}, expected {[tuple(e) for e in expected]}")
    for array in outputs:
        if not np.isfinite(array).all():
            raise ValueError(f"model returned non-finite {what}")


# --- parameters ----------------------------------------------------------------------------------------------------


def check_known(raw: Mapping[str, Any], known: Sequence[str], task: str) -> None:
    unknown = sorted(set(raw) - set(known))
    if unknown:
        allowed = ", ".join(known) if known else "none"
        raise BadParameters(f"unknown parameter(s) {', '.join(unknown)} for {task} (accepted: {allowed})")


def int_parameter(raw: Mapping[str, Any], name: str, default: int | None, low: int, high: int) -> int | None:
    value = raw.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadParameters(f"parameter {name!r} must be an integer, got {_kind(value)}")
    if not low <= value <= high:
        raise BadParameters(f"parameter {name!r} must be in [{low}, {high}], got {value}")
    return value


def bool_parameter(raw: Mapping[str, Any], name: str, default: bool) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise BadParameters(f"parameter {name!r} must be true or false, got {_kind(value)}")
    return value


def choice_parameter(raw: Mapping[str, Any], name: str, default: str | None, choices: Sequence[str]) -> str | None:
    value = raw.get(name, default)
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in choices:
        raise BadParameters(f"parameter {name!r} must be one of {', '.join(choices)}, got {value!r}")
    return value.lower()


def text_input(value: Any, where: str, name: str = "input") -> str:
    """A non-empty string that UTF-8 can carry (RFC 8259 section 8.2 leaves unpaired surrogates unpredictable)."""
    if not isinstance(value, str):
        raise BadInput(f"{where}: {name} must be a string, got {_kind(value)}")
    if not value.strip():
        raise BadInput(f"{where}: {name} is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = value[exc.start]
        raise BadInput(
            f"{where}: {name} holds an unpaired UTF-16 surrogate (\\u{ord(char):04x}) at character {exc.start}"
        ) from None
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


kind_of = _kind
