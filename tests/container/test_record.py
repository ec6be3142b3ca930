from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Literal

import pytest

from container.record import Invalid, Record, ValidationError, constrained


@dataclass(frozen=True, kw_only=True)
class Inner(Record):
    size: int = constrained(8, ge=1, le=64)


@dataclass(frozen=True, kw_only=True)
class Outer(Record):
    name: str
    kind: Literal["a", "b"] = "a"
    inner: Inner
    tags: list[str] = field(default_factory=list)
    modes: list[Literal["x", "y"]] = constrained(min_length=1)
    extra: dict[str, int] = field(default_factory=dict)
    ratio: float | None = None

    def _check(self) -> None:
        if len(set(self.modes)) != len(self.modes):
            raise Invalid("modes", "modes must not repeat")
        if self.name == "bad":
            raise ValueError("bad is not a name")


def good(**changes: object) -> dict[str, object]:
    return {"name": "n", "inner": {"size": 4}, "modes": ["x"], **changes}


def test_a_valid_dict_becomes_nested_records_and_dumps_back() -> None:
    outer = Outer.model_validate(good(tags=["t"], extra={"k": 1}, ratio=1))
    assert outer.inner == Inner(size=4) and outer.ratio == 1.0 and isinstance(outer.ratio, float)
    assert outer.model_dump() == {**good(tags=["t"], extra={"k": 1}), "kind": "a", "ratio": 1.0}
    assert Outer.model_validate_json(outer.model_dump_json()) == outer
    with pytest.raises(FrozenInstanceError):
        outer.name = "m"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("data", "loc", "message"),
    [
        (good(surprise=1), ("surprise",), "Extra inputs are not permitted"),
        ({"inner": {}, "modes": ["x"]}, ("name",), "Field required"),
        (good(kind="c"), ("kind",), "Input should be 'a' or 'b'"),
        (good(inner={"size": 0}), ("inner", "size"), "greater than or equal to 1"),
        (good(inner={"size": 65}), ("inner", "size"), "less than or equal to 64"),
        (good(inner={"size": True}), ("inner", "size"), "valid integer"),
        (good(inner={"size": "4"}), ("inner", "size"), "valid integer"),
        (good(inner=3), ("inner",), "valid dictionary"),
        (good(tags=["t", 2]), ("tags", 1), "valid string"),
        (good(modes=[]), ("modes",), "at least 1 item"),
        (good(modes=["x", "z"]), ("modes", 1), "Input should be 'x' or 'y'"),
        (good(modes=["x", "x"]), ("modes",), "Value error, modes must not repeat"),
        (good(name="bad"), (), "Value error, bad is not a name"),
        (good(extra={"k": "v"}), ("extra", "k"), "valid integer"),
    ],
)
def test_what_does_not_fit_is_refused_at_its_location(data: dict, loc: tuple, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        Outer.model_validate(data)
    [error] = caught.value.errors()
    assert error["loc"] == loc and message in error["msg"]


def test_building_in_code_validates_too_and_a_copy_does_not() -> None:
    assert Outer(name="n", inner={"size": 2}, modes=["y"]).inner == Inner(size=2)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="greater than or equal"):
        Inner(size=0)
    with pytest.raises(ValidationError, match="Field required"):
        Outer.model_validate({"name": "n", "modes": ["x"]})
    wider = Inner(size=2).model_copy(update={"size": 100})  # trusted, as pydantic's model_copy
    assert wider.size == 100
    assert Inner.model_construct(size=-1).size == -1


def test_json_that_is_not_json_says_so() -> None:
    with pytest.raises(ValidationError, match="Invalid JSON"):
        Outer.model_validate_json("{")
    with pytest.raises(ValidationError, match="valid dictionary"):
        Outer.model_validate_json(json.dumps([1]))
