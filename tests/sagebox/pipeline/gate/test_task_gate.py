"""The INT8 gate of every task: labelled data scored through the serving predictor, INT8 refused (and deleted) when
it loses more than allowed, and without labels a comparison with FP32 that says no labelled accuracy was measured."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from container.predictor import Predictor
from sagebox.errors import SageboxError
from sagebox.pipeline.export.servable import build_fp32
from sagebox.pipeline.quantize.options import QuantizeOptions
from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize
from tests.model_factory import make_model_folder
from tests.task_models import TEXTS

pytestmark = pytest.mark.slow

SENTENCES = [
    *TEXTS,
    "Our order arrived two days late and the box was damaged.",
    "The museum in Lyon opens at nine on Sundays.",
    "Dr Amina Osei joined Northwind Labs as head of research.",
    "This phone's battery easily lasts a whole weekend.",
    "Fares on the coastal line rise by four percent in May.",
    "I would happily eat at that noodle bar every day.",
    "The committee postponed its decision until the next meeting.",
]


def self_labelled(folder: Path, task: str, work: Path) -> Path:
    """Labelled data whose gold labels are the FP32 model's own answers: FP32 scores 100 by construction, so
    whatever INT8 loses is quantization error."""
    fp32 = work / "labelling-fp32"
    build_fp32(folder, fp32)
    predictor = Predictor.load(fp32)
    params = predictor.task.parse_parameters({})
    results = predictor.infer([predictor.task.parse_item(text, "item") for text in SENTENCES], params)
    path = work / f"{task}.jsonl"
    with path.open("w") as out:
        for text, result in zip(SENTENCES, results, strict=True):
            if task == "text-classification":
                record = {"text": text, "label": predictor.manifest.labels[int(result.values.argmax())]}  # type: ignore[index]
            else:
                entities = [{"start": e["start"], "end": e["end"], "label": e["entity_group"]} for e in result]
                record = {"text": text, "entities": entities}
            out.write(json.dumps(record) + "\n")
    return path


def test_a_classifier_is_gated_on_accuracy_and_macro_f1(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "cls", "roberta", "text-classification")
    data = self_labelled(folder, "text-classification", tmp_path)
    outcome = run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=data, max_f1_drop=25.0))
    report = json.loads((tmp_path / "out" / "quantize-report.json").read_text())
    assert report["task"] == "text-classification" and report["gate"]["labelled"] is True
    assert [c["metric"] for c in report["gate"]["checks"]] == ["accuracy", "macro-F1"]
    assert outcome.fp32.metrics == {"accuracy": 100.0, "macro-F1": 100.0}
    assert outcome.gate.passed and (tmp_path / "out" / "int8" / "manifest.json").is_file()
    assert report["fp32"]["examples"] == len(SENTENCES)


def outlier_classifier(root: Path) -> Path:
    """A classifier whose first logit row is 300x the others: per-tensor INT8 weights round the other rows to
    nothing, so the label among them is no longer the model's."""
    import torch
    from transformers import AutoModelForSequenceClassification

    folder = Path(shutil.copytree(make_model_folder(root / "base", "bert", "text-classification"), root / "outlier"))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder))
    with torch.no_grad():
        model.classifier.weight[0] *= 300.0
    model.save_pretrained(str(folder))
    return folder


def test_an_int8_classifier_that_loses_accuracy_is_refused_and_deleted(tmp_path: Path) -> None:
    # Deterministic (seeded model, fixed texts): per-tensor INT8 changes 1 of the 10 labels, 10 points against the
    # default 1-point limit.
    folder = outlier_classifier(tmp_path)
    data = self_labelled(folder, "text-classification", tmp_path)
    per_tensor = QuantizeOptions(per_channel=False)
    outcome = run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=data, options=per_tensor))
    assert outcome.fp32.metrics["accuracy"] == 100.0 and outcome.int8.metrics["accuracy"] <= 99.0
    assert not outcome.gate.passed and outcome.int8_dir is None
    assert not (tmp_path / "out" / "int8").exists() and (tmp_path / "out" / "fp32" / "manifest.json").is_file()
    assert outcome.gate.message().startswith("accuracy gate FAILED: INT8 accuracy")
    report = json.loads((tmp_path / "out" / "quantize-report.json").read_text())
    assert report["int8"]["model_dir"] is None and report["gate"]["passed"] is False


def test_a_tagger_is_gated_on_entity_f1(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "ner", "distilbert", "token-classification")
    data = self_labelled(folder, "token-classification", tmp_path)
    outcome = run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=data, max_f1_drop=25.0))
    assert outcome.fp32.metrics == {"entity F1": 100.0}
    [check] = outcome.gate.checks
    assert check.name == "entity F1" and check.kind == "drop" and outcome.gate.labelled


def test_embeddings_are_gated_on_cosine_and_recall(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "emb", "bert", "feature-extraction")
    data = tmp_path / "retrieval.jsonl"
    data.write_text("".join(json.dumps({"query": s[:20], "positive": s}) + "\n" for s in SENTENCES))
    request = QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=data, min_cosine=0.9, max_f1_drop=25.0)
    outcome = run_quantize(request)
    kinds = [(c.name, c.kind) for c in outcome.gate.checks]
    assert kinds == [("mean cosine(INT8, FP32)", "floor"), ("recall@10", "drop")]
    assert 0.9 <= outcome.gate.checks[0].int8 <= 1.0
    strict = run_quantize(QuantizeRequest(model=folder, out=tmp_path / "strict", eval_data=data, min_cosine=1.0))
    assert not strict.gate.passed and "mean cosine(INT8, FP32)" in strict.gate.message()


def test_without_labelled_data_int8_is_compared_with_fp32_and_the_gate_says_so(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "cls", "bert", "text-classification")
    texts = tmp_path / "calibration.txt"
    texts.write_text("\n".join(SENTENCES) + "\n")
    outcome = run_quantize(
        QuantizeRequest(model=folder, out=tmp_path / "out", calibration_data=texts, max_f1_drop=25.0)
    )
    assert not outcome.gate.labelled and outcome.fp32.metrics == {}
    assert "no labelled accuracy was measured" in outcome.gate.message()
    assert f"{len(SENTENCES)} calibration texts" in outcome.gate.data
    builtin = run_quantize(QuantizeRequest(model=folder, out=tmp_path / "builtin", max_f1_drop=25.0))
    assert "built-in calibration text" in builtin.gate.data


def test_bad_or_mismatched_eval_data_fails_before_anything_is_written(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "cls", "bert", "text-classification")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "label": "positive"}\n{"text": 3, "label": "negative"}\n')
    with pytest.raises(SageboxError, match=r"bad\.jsonl:2"):
        run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=bad))
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('{"text": "fine", "label": "spam"}\n')
    with pytest.raises(SageboxError, match="label 'spam' is not one of the model's labels"):
        run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=unknown))
    multi = tmp_path / "multi.jsonl"
    multi.write_text('{"text": "fine", "labels": ["positive", "neutral"]}\n')
    with pytest.raises(SageboxError, match="holds multi-label examples; the model is single_label_classification"):
        run_quantize(QuantizeRequest(model=folder, out=tmp_path / "out", eval_data=multi))
    assert not (tmp_path / "out").exists()
