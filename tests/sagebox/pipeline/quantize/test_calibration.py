from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import QAExample
from sagebox.pipeline.quantize.calibration import calibration_batches, processor_for


def test_batches_use_the_servers_features(tiny_hf_folder: Path, dev_examples: list[QAExample]) -> None:
    processor = processor_for(tiny_hf_folder, [64, 128, 256, 384])
    batches = calibration_batches(dev_examples, processor, batches=5, batch_size=1)
    assert len(batches) == 5
    first = processor.featurize(dev_examples[0].question, dev_examples[0].context)[0]
    np.testing.assert_array_equal(batches[0]["input_ids"][0], first.input_ids)
    np.testing.assert_array_equal(batches[0]["attention_mask"][0], first.attention_mask)
    for batch in batches:
        assert set(batch) == {"input_ids", "attention_mask", "token_type_ids"}
        assert batch["input_ids"].shape[1] in processor.buckets  # real bucketed shapes, not padded to max
        assert batch["input_ids"].dtype == np.int64


def test_same_bucket_batches_and_running_out(tiny_hf_folder: Path, dev_examples: list[QAExample]) -> None:
    processor = processor_for(tiny_hf_folder, [64, 128, 256, 384])
    batches = calibration_batches(dev_examples, processor, batches=1000, batch_size=4)
    features = sum(len(processor.featurize(e.question, e.context)) for e in dev_examples)
    assert sum(b["input_ids"].shape[0] for b in batches) == features  # data ran out: everything used once
    assert len(batches) < 1000
    assert all(b["input_ids"].shape[0] <= 4 for b in batches)


def test_no_usable_question_is_an_error(tiny_hf_folder: Path) -> None:
    processor = processor_for(tiny_hf_folder, [64])
    too_long = [QAExample("1", "why " * 80, "short context", ())]
    with pytest.raises(SageboxError, match="yields no model input"):
        calibration_batches(too_long, processor, batches=10)
    with pytest.raises(SageboxError, match="at least one batch"):
        calibration_batches(too_long, processor, batches=0)
