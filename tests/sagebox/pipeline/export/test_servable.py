from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from container.manifest import load_verified
from container.predictor import Predictor
from container.tasks.question_answering import qa_processor
from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import QAExample
from sagebox.pipeline.export.servable import build_fp32, source_spec
from sagebox.pipeline.load.hf_task import detect_task


def test_fused_onnx_matches_the_plain_graph_on_padded_batches(
    tiny_hf_folder: Path, tiny_onnx_model_dir: Path, dev_examples: list[QAExample], tmp_path: Path
) -> None:
    import onnx

    build_fp32(tiny_hf_folder, tmp_path / "plain", fuse=False)
    fused_ops = {n.op_type for n in onnx.load(str(tiny_onnx_model_dir / "model.onnx")).graph.node}
    plain_ops = {n.op_type for n in onnx.load(str(tmp_path / "plain" / "model.onnx")).graph.node}
    assert {"Attention", "EmbedLayerNormalization", "LayerNormalization"} <= fused_ops
    assert "SkipLayerNormalization" not in fused_ops  # the slower CPU kernel (see container/handlers/onnx.py)
    assert "Attention" not in plain_ops
    fused, plain = Predictor.load(tiny_onnx_model_dir), Predictor.load(tmp_path / "plain")
    features = [f for e in dev_examples[:24] for f in qa_processor(fused.task).featurize(e.question, e.context)]
    # The bucket whose windows differ most in length: real padding inside one batch.
    bucket = max({f.bucket for f in features}, key=lambda b: len({f.length for f in features if f.bucket == b}))
    same_bucket = [f for f in features if f.bucket == bucket][:8]
    assert len({f.length for f in same_bucket}) > 1
    a_start, a_end = fused.predict_batch(same_bucket)
    b_start, b_end = plain.predict_batch(same_bucket)
    mask = np.stack([f.attention_mask for f in same_bucket]) == 1
    np.testing.assert_allclose(a_start[mask], b_start[mask], atol=1e-4)
    np.testing.assert_allclose(a_end[mask], b_end[mask], atol=1e-4)


def test_source_file_supplies_name_and_license(tiny_hf_folder: Path, tmp_path: Path) -> None:
    folder = Path(shutil.copytree(tiny_hf_folder, tmp_path / "m"))
    (folder / "sagebox_source.json").unlink(missing_ok=True)
    assert source_spec(detect_task(folder)).license == "unknown"
    (folder / "sagebox_source.json").write_text(json.dumps({"name": "acme/qa", "license": "MIT AND apache-2.0"}))
    spec = source_spec(detect_task(folder))
    assert (spec.name, spec.license, spec.architecture) == (
        "acme/qa",
        "MIT AND apache-2.0",
        "BertForQuestionAnswering",
    )
    manifest = build_fp32(folder, tmp_path / "out", runtime="torchscript")
    assert manifest.source == spec
    assert load_verified(tmp_path / "out").source.license == "MIT AND apache-2.0"
    (folder / "sagebox_source.json").write_text("{oops")
    with pytest.raises(SageboxError, match=r"sagebox_source\.json is not valid JSON"):
        source_spec(detect_task(folder))
