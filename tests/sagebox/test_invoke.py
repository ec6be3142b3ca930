"""sagebox.invoke's retries: a model at capacity (ModelError, OriginalStatusCode 503) is retried a bounded number of
times, never sooner than its Retry-After, with jittered backoff when it gave none; other errors are said at once."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sagebox.errors import SageboxError
from sagebox.invoke import Retry, invoke_json


def model_error(status: int, retry_after: str | None = None) -> ClientError:
    """A ModelError as boto3's sagemaker-runtime client raises it (tests/sagebox/box/test_gateway_wire.py checks
    that botocore reads the gateway's answer into this shape)."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    message = json.dumps({"message": "server is at capacity; retry later" if status == 503 else "boom"})
    response: Any = {
        "Error": {"Code": "ModelError", "Message": f"Received server error ({status}) from primary"},
        "OriginalStatusCode": status,
        "OriginalMessage": message,
        "ResponseMetadata": {"HTTPStatusCode": 424, "HTTPHeaders": headers},
    }
    return ClientError(response, "InvokeEndpoint")


class Runtime:
    """Stands in for the sagemaker-runtime client: raises the queued errors, then answers."""

    def __init__(self, *errors: ClientError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def invoke_endpoint(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"Body": io.BytesIO(b'{"answer": "four"}')}


def recording_retry(seed: int = 7, **kwargs: Any) -> tuple[Retry, list[float]]:
    slept: list[float] = []
    return Retry(sleep=slept.append, rng=random.Random(seed), **kwargs), slept


def test_a_model_at_capacity_is_retried_no_sooner_than_its_retry_after() -> None:
    runtime = Runtime(model_error(503, "2"), model_error(503, "1"))
    retry, slept = recording_retry()
    assert invoke_json(runtime, "ep", {"inputs": "x"}, retry=retry).body == {"answer": "four"}
    assert runtime.calls == 3
    assert 2.0 <= slept[0] <= 3.0 and 1.0 <= slept[1] <= 1.5  # never before the server said, jittered after
    assert slept[0] != 2.0 and slept[1] != 1.0


def test_without_retry_after_the_backoff_is_full_jitter_under_a_growing_cap() -> None:
    retry, slept = recording_retry(attempts=6, base_s=0.5, cap_s=2.0)
    runtime = Runtime(*[model_error(503) for _ in range(5)])
    invoke_json(runtime, "ep", {"inputs": "x"}, retry=retry)
    caps = [0.5, 1.0, 2.0, 2.0, 2.0]
    assert all(0.0 <= waited <= cap for waited, cap in zip(slept, caps, strict=True))
    assert len(set(slept)) == len(slept)  # random, not a fixed schedule that makes refused clients return together


def test_retries_are_bounded_and_the_last_refusal_is_one_line() -> None:
    retry, slept = recording_retry()
    runtime = Runtime(*[model_error(503, "1") for _ in range(5)])
    with pytest.raises(SageboxError) as caught:
        invoke_json(runtime, "ep", {"inputs": "x"}, retry=retry)
    assert runtime.calls == 3 and len(slept) == 2
    assert (
        str(caught.value)
        == "endpoint ep: the model answered 503: server is at capacity; retry later (after 3 attempts)"
    )


@pytest.mark.parametrize("retry", [None, Retry(sleep=lambda s: None)])
def test_a_failing_model_is_said_at_once_and_no_retry_means_one_call(retry: Retry | None) -> None:
    failing = Runtime(model_error(500))
    with pytest.raises(SageboxError, match=r"^endpoint ep: the model answered 500: boom$"):
        invoke_json(failing, "ep", {"inputs": "x"}, retry=retry)
    assert failing.calls == 1
    busy = Runtime(model_error(503, "1"))
    if retry is None:  # a benchmark's call: the refusal is counted, not hidden by a retry
        with pytest.raises(SageboxError, match="503"):
            invoke_json(busy, "ep", {"inputs": "x"})
        assert busy.calls == 1
