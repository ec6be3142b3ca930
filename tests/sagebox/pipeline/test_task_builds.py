"""Every task on three architectures through `build_all`: the FP32 artifact answers as the transformers pipeline does,
INT8 passed its gate and stays close, the Neuron artifact (emulated, bf16 auto-cast) answers too; the manifests record
what the server needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from container.manifest import load_verified
from container.predictor import Predictor
from tests.model_factory import ARCHS, NER_LABELS, SENTIMENT_LABELS
from tests.task_models import TEXT_TASKS, TEXTS, WITH_NEURON, TaskBuild, assert_same, reference

pytestmark = pytest.mark.slow

CASES = [(arch, task) for arch in ARCHS for task in TEXT_TASKS]


def served(model_dir: Path, task: str, texts: tuple[str, ...], parameters: dict[str, Any] | None = None) -> Any:
    """What the server would answer to {"inputs": texts, "parameters": ...} (its task's parse, decode and render)."""
    predictor = Predictor.load(model_dir)
    try:
        params = predictor.task.parse_parameters(parameters or {})
        items = [predictor.task.parse_item(text, f"item {i}") for i, text in enumerate(texts)]
        body, _ = predictor.task.render(items, predictor.infer(items, params), True, params)
        return body
    finally:
        predictor.close()


@pytest.mark.parametrize(("arch", "task"), CASES)
def test_fp32_answers_as_the_transformers_pipeline(
    task_builds: dict[tuple[str, str], TaskBuild], arch: str, task: str
) -> None:
    built = task_builds[(arch, task)]
    assert_same(task, served(built.model_dir("fp32"), task, TEXTS), reference(built.folder, task, TEXTS))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(
    "parameters",
    [
        {"aggregation_strategy": "none"},
        {"aggregation_strategy": "first"},
        {"aggregation_strategy": "average"},
        {"aggregation_strategy": "max"},
        {"ignore_labels": []},
    ],
)
def test_every_aggregation_strategy_answers_as_the_pipeline(
    task_builds: dict[tuple[str, str], TaskBuild], arch: str, parameters: dict[str, Any]
) -> None:
    built = task_builds[(arch, "token-classification")]
    got = served(built.model_dir("fp32"), "token-classification", TEXTS, parameters)
    assert_same("token-classification", got, reference(built.folder, "token-classification", TEXTS, parameters))


@pytest.mark.parametrize("arch", ARCHS)
def test_classification_top_k_and_functions_answer_as_the_pipeline(
    task_builds: dict[tuple[str, str], TaskBuild], arch: str
) -> None:
    built = task_builds[(arch, "text-classification")]
    for parameters in ({"top_k": None}, {"top_k": 2}, {"function_to_apply": "sigmoid"}, {"function_to_apply": "none"}):
        got = served(built.model_dir("fp32"), "text-classification", TEXTS, parameters)
        assert_same("text-classification", got, reference(built.folder, "text-classification", TEXTS, parameters))


@pytest.mark.parametrize(("arch", "task"), CASES)
def test_int8_and_neuron_stay_close_to_fp32(
    task_builds: dict[tuple[str, str], TaskBuild], arch: str, task: str
) -> None:
    built = task_builds[(arch, task)]
    fp32 = Predictor.load(built.model_dir("fp32"))
    outputs = {}
    variants = ("fp32", "int8", "neuron") if (arch, task) in WITH_NEURON else ("fp32", "int8")
    for variant in variants:
        predictor = fp32 if variant == "fp32" else Predictor.load(built.model_dir(variant))
        params = predictor.task.parse_parameters({})
        items = [predictor.task.parse_item(text, "item") for text in TEXTS]
        windows = [w for item in items for w in predictor.task.featurize(item, params)]
        outputs[variant] = np.stack([out[0] for out in predictor.run(windows)])
        predictor.close()
    for variant, tolerance in (("int8", 0.25), ("neuron", 0.05))[: len(variants) - 1]:
        a, b = outputs["fp32"].ravel(), outputs[variant].ravel()
        cosine = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
        assert cosine > 1 - tolerance, f"{variant}: cosine {cosine}"


@pytest.mark.parametrize("arch", ARCHS)
def test_manifests_record_the_task_labels_and_pooling(task_builds: dict[tuple[str, str], TaskBuild], arch: str) -> None:
    classifier = load_verified(task_builds[(arch, "text-classification")].model_dir("int8"))
    assert classifier.task == "text-classification" and classifier.labels == list(SENTIMENT_LABELS)
    assert classifier.problem_type == "single_label_classification" and classifier.quantization is not None
    tagger = load_verified(task_builds[(arch, "token-classification")].model_dir("int8"))
    assert tagger.task == "token-classification" and tagger.labels == list(NER_LABELS)
    embedder = load_verified(task_builds[(arch, "feature-extraction")].model_dir("fp32"))
    assert embedder.pooling is not None and embedder.pooling.modes == ["mean"] and embedder.pooling.normalize
    assert embedder.pooling.dimension == 32 and embedder.sequence_buckets[-1] == 128  # sentence_bert max_seq_length
    assert embedder.source.license == "mit" and embedder.source.origin == "folder"
    for task in TEXT_TASKS:
        built = task_builds[(arch, task)]
        expected = {"fp32", "int8", "neuron"} if (arch, task) in WITH_NEURON else {"fp32", "int8"}
        assert {p.parent.name for p in built.packages.glob("*/model.tar.gz")} == expected


@pytest.mark.parametrize(("arch", "task"), WITH_NEURON)
def test_the_neuron_manifest_records_how_it_was_compiled(
    task_builds: dict[tuple[str, str], TaskBuild], arch: str, task: str
) -> None:
    manifest = load_verified(task_builds[(arch, task)].model_dir("neuron"))
    assert manifest.task == task and manifest.compile is not None and manifest.runtime == "neuron"
    assert manifest.compile.auto_cast == "matmult" and manifest.sequence_buckets[-1] in (128, 512)
