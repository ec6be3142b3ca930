"""In-process inference: bucket grouping and the per-call batch limits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from container.predictor import Predictor, PredictorOptions
from container.tasks.question_answering import qa_processor


@pytest.fixture(scope="module")
def predictor(tiny_onnx_model_dir: Path) -> Predictor:
    return Predictor.load(tiny_onnx_model_dir, PredictorOptions(max_batch_size=8, max_batch_tokens=512))


def test_batch_limit_is_the_batch_size_or_the_token_budget(predictor: Predictor) -> None:
    assert [predictor.batch_limit(b) for b in (64, 128, 256, 384, 1024)] == [8, 4, 2, 1, 1]


def test_long_windows_share_fewer_model_calls_than_short_ones(predictor: Predictor) -> None:
    fillers = {b: qa_processor(predictor.task).filler_feature(b) for b in (64, 256, 384)}
    # Rolled token ids make every copy a different input, so a mixed-up result would show.
    features = [
        replace(fillers[b], input_ids=np.roll(fillers[b].input_ids, i))
        for b, copies in ((64, 10), (256, 3), (384, 2))
        for i in range(copies)
    ]
    features = features[::2] + features[1::2]  # buckets interleaved, as concurrent requests arrive
    before = predictor.calls_by_bucket()
    logits = predictor.run(features)
    after = predictor.calls_by_bucket()
    new = {
        bucket: {size: count - before.get(bucket, {}).get(size, 0) for size, count in sizes.items()}
        for bucket, sizes in after.items()
    }
    assert {b: {s: c for s, c in sizes.items() if c} for b, sizes in new.items() if any(sizes.values())} == {
        "64": {"8": 1, "2": 1},
        "256": {"2": 1, "1": 1},
        "384": {"1": 2},
    }
    # Each feature gets its own logits back, the same as when it runs alone.
    assert not np.allclose(logits[0][0], logits[2][0])  # two different 64-token inputs
    for feature, (start, end) in zip(features, logits, strict=True):
        [(alone_start, alone_end)] = predictor.run([feature])
        np.testing.assert_allclose(start, alone_start, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(end, alone_end, rtol=1e-4, atol=1e-5)


def test_an_onnx_model_warms_up_on_its_smallest_and_largest_bucket(tiny_onnx_model_dir: Path) -> None:
    loaded = Predictor.load(tiny_onnx_model_dir)
    buckets = loaded.task.buckets
    assert len(buckets) > 2  # the other buckets are not called before the first request
    ends = [buckets[0], buckets[-1]]
    assert loaded.calls_by_bucket() == {str(b): {"1": 1} for b in ends}  # JSON-ready keys
    times = loaded.load_times
    assert times is not None and list(times.warmed) == ends
    assert min(times.verify_s, times.runtime_s, times.task_s, times.warm_up_s) > 0
    assert f"on buckets {ends}" in times.describe()


def test_a_torchscript_model_warms_up_on_every_bucket(tiny_model_dir: Path) -> None:
    loaded = Predictor.load(tiny_model_dir)
    assert loaded.manifest.runtime == "torchscript"  # its graph specializes per shape on its first calls
    assert loaded.calls_by_bucket() == {str(b): {"1": 1} for b in loaded.task.buckets}
