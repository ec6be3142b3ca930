"""The runtime's parameter constraints: the same as botocore's service model, and AWS's validation messages."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import botocore
import pytest

from sagebox.box import runtime_params
from sagebox.box.runtime_params import INVOKE_ENDPOINT, INVOKE_ENDPOINT_ASYNC, validation_message


def _service_model() -> dict[str, Any]:
    data = Path(botocore.__file__).parent / "data" / "sagemaker-runtime"
    (model,) = sorted(data.glob("*/service-2.json*"))
    opener = gzip.open if model.suffix == ".gz" else open
    with opener(model, "rt") as handle:
        return dict(json.load(handle))


@pytest.mark.parametrize(
    ("shape", "table"),
    [
        ("InvokeEndpointInput", INVOKE_ENDPOINT),
        ("InvokeEndpointAsyncInput", INVOKE_ENDPOINT_ASYNC),
        ("InvokeEndpointWithResponseStreamInput", runtime_params.INVOKE_ENDPOINT_WITH_RESPONSE_STREAM),
    ],
)
def test_the_table_holds_every_header_member_with_botocores_bounds(
    shape: str, table: tuple[runtime_params.Constraint, ...]
) -> None:
    shapes = _service_model()["shapes"]
    expected = {}
    for member, spec in shapes[shape]["members"].items():
        if spec.get("location") == "header":
            target = shapes[spec["shape"]]
            expected[member] = (spec["locationName"], target.get("max"), target.get("min", 0))
    ours = {
        c.member: (c.header, c.integer[1] if c.integer else c.max_length, c.integer[0] if c.integer else c.min_length)
        for c in table
    }
    assert ours == expected


def test_valid_parameters_pass() -> None:
    headers = {
        "content-type": "application/json",
        "x-amzn-sagemaker-custom-attributes": "trace=1; c=" + "x" * 1000,
        "x-amzn-sagemaker-target-variant": "blue-2",
        "x-amzn-sagemaker-inference-id": "run 7/a",
        "x-amzn-sagemaker-session-id": "NEW_SESSION",
    }
    assert validation_message("sagebox-c6i-int8", headers, INVOKE_ENDPOINT) is None


@pytest.mark.parametrize(
    ("name", "headers", "fragment"),
    [
        (
            "qa",
            {"x-amzn-sagemaker-custom-attributes": "x" * 1025},
            "at 'customAttributes' failed to satisfy constraint: Member must have length less than or equal to 1024",
        ),
        (
            "qa",
            {"x-amzn-sagemaker-custom-attributes": "caf\xe9"},
            "at 'customAttributes' failed to satisfy constraint: Member must satisfy regular expression pattern",
        ),
        ("qa", {"x-amzn-sagemaker-inference-id": " leading-space"}, "at 'inferenceId'"),
        ("qa", {"x-amzn-sagemaker-inference-id": "i" * 65}, "length less than or equal to 64"),
        ("qa", {"x-amzn-sagemaker-target-variant": "blue_2"}, "at 'targetVariant'"),
        ("qa_1", {}, "Value 'qa_1' at 'endpointName'"),
        (
            "q" * 64,
            {},
            "at 'endpointName' failed to satisfy constraint: Member must have length less than or equal to 63",
        ),
    ],
)
def test_a_broken_parameter_gets_awss_message(name: str, headers: dict[str, str], fragment: str) -> None:
    message = validation_message(name, headers, INVOKE_ENDPOINT)
    assert message is not None and message.startswith("1 validation error detected: Value ")
    assert fragment in message


def test_every_broken_parameter_is_listed_and_long_values_are_cut() -> None:
    headers = {"x-amzn-sagemaker-custom-attributes": "a" * 2000, "x-amzn-sagemaker-target-variant": "-"}
    message = validation_message("qa", headers, INVOKE_ENDPOINT)
    assert message is not None and message.startswith("2 validation errors detected: ")
    assert f"Value '{'a' * 64}...' at 'customAttributes'" in message and "at 'targetVariant'" in message


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("59", "greater than or equal to 60"), ("21601", "less than or equal to 21600"), ("1h", "must be an integer")],
)
def test_async_integer_members_are_bounded(value: str, fragment: str) -> None:
    headers = {"x-amzn-sagemaker-inputlocation": "s3://b/k", "x-amzn-sagemaker-requestttlseconds": value}
    message = validation_message("qa", headers, INVOKE_ENDPOINT_ASYNC)
    assert message is not None and "at 'requestTTLSeconds'" in message and fragment in message
    headers["x-amzn-sagemaker-requestttlseconds"] = "600"
    assert validation_message("qa", headers, INVOKE_ENDPOINT_ASYNC) is None
