"""Frozen records validated from JSON: what `manifest.json` is read into, without a validation library.

The serving path reads one small manifest per start, and importing pydantic and building its schemas for the
manifest's seven models cost ~250 ms of a ~1 s cold start (2-core EPYC; `python -X importtime`), more than
ONNX Runtime's session creation. A record is a frozen dataclass whose field types say what is accepted:

- `str`, `int` (not bool), `float` (int too), `bool`, `Literal[...]`, `list[X]`, `dict[str, X]`, `X | None`, and
  nested records (from a dict, or a record already built);
- `constrained(default, ge=, le=, min_length=)` bounds a field;
- unknown keys and missing required fields are refused;
- `_prepare(data)` (a classmethod, before validation) may rewrite the raw dict, `_check()` (after) raises
  `ValueError` (or `Invalid` for a field) for what the types cannot say.

Construction validates too (`Record(**fields)`), as the writers of manifests build them in code. The methods
keep the names of the pydantic API this project used (`model_validate`, `model_validate_json`, `model_dump`,
`model_dump_json`, `model_copy`, `model_construct`), and errors read as pydantic's did ("Field required", "Extra
inputs are not permitted", "Input should be ...") with the location of the first problem.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import threading
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

R = TypeVar("R", bound="Record")
Loc = tuple[str | int, ...]

_MISSING = dataclasses.MISSING
# Set while this thread builds a record from values already validated (or trusted): __post_init__ skips the check.
_trusted = threading.local()


@contextlib.contextmanager
def _trusting() -> Iterator[None]:
    before = getattr(_trusted, "on", False)
    _trusted.on = True
    try:
        yield
    finally:
        _trusted.on = before


class ValidationError(ValueError):
    """Data that does not fit a record. `errors()` lists the first problem as {"loc": (...), "msg": "..."}."""

    def __init__(self, loc: Loc, msg: str, title: str = "record") -> None:
        self.loc, self.msg = loc, msg
        where = ".".join(str(p) for p in loc) or "(top level)"
        super().__init__(f"1 validation error for {title}\n{where}\n  {msg}")

    def errors(self) -> list[dict[str, Any]]:
        return [{"loc": self.loc, "msg": self.msg}]


class Invalid(ValueError):
    """Raised by a record's `_check()` for one field: the error's location names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def constrained(
    default: Any = _MISSING,
    *,
    default_factory: Any = _MISSING,
    ge: float | None = None,
    le: float | None = None,
    min_length: int | None = None,
) -> Any:
    """A field with bounds: numbers within [ge, le], lists of at least `min_length` items."""
    bounds = {"ge": ge, "le": le, "min_length": min_length}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=bounds)


def _describe(value: object) -> str:
    return repr(value)


def _literal_message(options: tuple[Any, ...]) -> str:
    shown = [repr(o) for o in options]
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    return f"Input should be {listed}"


def _convert(hint: Any, value: Any, loc: Loc) -> Any:
    """`value` as `hint` says, or ValidationError at `loc`."""
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = get_args(hint)
        if value is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        if len(real) == 1:
            return _convert(real[0], value, loc)
        for option in real:  # unions of several types: the first that takes it
            try:
                return _convert(option, value, loc)
            except ValidationError:
                continue
        raise ValidationError(loc, f"Input should be one of {real}, not {_describe(value)}")
    if origin is Literal:
        options = get_args(hint)
        if any(value == o and type(value) is type(o) for o in options):
            return value
        raise ValidationError(loc, _literal_message(options))
    if origin is list:
        if not isinstance(value, list | tuple):
            raise ValidationError(loc, "Input should be a valid list")
        (item,) = get_args(hint)
        return [_convert(item, v, (*loc, i)) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, Mapping):
            raise ValidationError(loc, "Input should be a valid dictionary")
        key_hint, value_hint = get_args(hint)
        return {_convert(key_hint, k, (*loc, k)): _convert(value_hint, v, (*loc, k)) for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, Record):
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError(loc, f"Input should be a valid dictionary or instance of {hint.__name__}")
        return hint._validated(dict(value), loc)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValidationError(loc, "Input should be a valid boolean")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValidationError(loc, "Input should be a valid integer")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ValidationError(loc, "Input should be a valid number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValidationError(loc, "Input should be a valid string")
    if hint is Any or hint is object:
        return value
    raise TypeError(f"record fields of type {hint!r} are not supported")  # a programming error, not bad data


def _bounded(field: dataclasses.Field[Any], value: Any, loc: Loc) -> None:
    ge, le, min_length = field.metadata.get("ge"), field.metadata.get("le"), field.metadata.get("min_length")
    if value is None:
        return
    if ge is not None and value < ge:
        raise ValidationError(loc, f"Input should be greater than or equal to {ge}")
    if le is not None and value > le:
        raise ValidationError(loc, f"Input should be less than or equal to {le}")
    if min_length is not None and len(value) < min_length:
        plural = "item" if min_length == 1 else "items"
        message = f"List should have at least {min_length} {plural} after validation, not {len(value)}"
        raise ValidationError(loc, message)


def _dumped(value: Any) -> Any:
    if isinstance(value, Record):
        return value.model_dump()
    if isinstance(value, list):
        return [_dumped(v) for v in value]
    if isinstance(value, dict):
        return {k: _dumped(v) for k, v in value.items()}
    return value


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """Subclasses are `@dataclasses.dataclass(frozen=True, kw_only=True)` records (see the module docstring)."""

    def __post_init__(self) -> None:
        # Validate what a caller built in code; `_validated` has already checked what it passes.
        if not getattr(_trusted, "on", False):
            fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
            checked = type(self)._validated(fields, ())
            for name in fields:
                object.__setattr__(self, name, getattr(checked, name))

    @classmethod
    @functools.cache
    def _hints(cls) -> dict[str, Any]:
        return typing.get_type_hints(cls)

    @classmethod
    def _prepare(cls, data: dict[str, Any]) -> dict[str, Any]:
        """The raw fields before validation (e.g. old names mapped to new); override to rewrite them."""
        return data

    def _check(self) -> None:
        """What the field types cannot say; raise ValueError (whole record) or Invalid (one field)."""

    @classmethod
    def _validated(cls: type[R], data: dict[str, Any], loc: Loc) -> R:
        data = cls._prepare(dict(data))
        hints = cls._hints()
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        for key in data:
            if key not in fields:
                raise ValidationError((*loc, key), "Extra inputs are not permitted", cls.__name__)
        values: dict[str, Any] = {}
        for name, field in fields.items():
            if name in data:
                value = _convert(hints[name], data[name], (*loc, name))
                _bounded(field, value, (*loc, name))
                values[name] = value
            elif field.default is _MISSING and field.default_factory is _MISSING:
                raise ValidationError((*loc, name), "Field required", cls.__name__)
        with _trusting():
            record = cls(**values)
        try:
            record._check()
        except Invalid as exc:
            raise ValidationError((*loc, exc.field), f"Value error, {exc}", cls.__name__) from None
        except ValueError as exc:
            raise ValidationError(loc, f"Value error, {exc}", cls.__name__) from None
        return record

    # --- the pydantic-named surface ------------------------------------------------------------------------------

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:
        if isinstance(data, cls):
            return data
        if not isinstance(data, Mapping):
            message = f"Input should be a valid dictionary or instance of {cls.__name__}"
            raise ValidationError((), message, cls.__name__)
        return cls._validated(dict(data), ())

    @classmethod
    def model_validate_json(cls: type[R], text: str | bytes) -> R:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError((), f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        return cls.model_validate(data)

    @classmethod
    def model_construct(cls: type[R], **values: Any) -> R:
        """A record from trusted values, not validated (tests build impossible ones with it)."""
        with _trusting():
            return cls(**values)

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """Every field (defaults included) as plain dicts, lists and scalars; the same in "python" and "json" mode."""
        return {f.name: _dumped(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump())

    def model_copy(self: R, update: Mapping[str, Any] | None = None) -> R:
        """A copy with `update` applied, not validated (as pydantic's model_copy)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return type(self).model_construct(**{**values, **(update or {})})
