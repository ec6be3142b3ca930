"""Every task on every architecture, built once per test session: tiny random-weight folders (tests/model_factory.py)
through `build_all` (FP32, gated INT8, Neuron, packages), and what the `transformers` pipelines answer for the same
inputs (the reference every serving path must equal).

Pipelines' answers are computed on the FP32 PyTorch model the folder holds; served FP32 ONNX answers must match them
(scores within 1e-4, labels and entity spans exactly, embeddings cosine >= 0.9999).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.model_factory import ARCHS, make_model_folder

TEXT_TASKS = ("text-classification", "token-classification", "feature-extraction")
TASKS = ("question-answering", *TEXT_TASKS)
# Neuron artifacts (the slowest part of a build: a traced graph per bucket) for one task per architecture.
WITH_NEURON = (
    ("bert", "token-classification"),
    ("distilbert", "text-classification"),
    ("roberta", "feature-extraction"),
)
# The OpenVINO INT8 build beside ONNX Runtime's (converted from the architecture's PyTorch module) for one build here:
# ~15-20 s each under the suite's load. All twelve architecture x task builds converted and passed their gates once
# (docs/int8.md); tests/sagebox/pipeline/quantize/test_choose.py covers loading per CPU kind, the demo QA and
# embeddings models build it in the box's end-to-end tests.
WITH_OPENVINO = (("distilbert", "token-classification"),)
# Random tiny models decide near ties that INT8 rounding can flip: the gate runs, with room for that.
TINY_MAX_DROP = 25.0
TINY_MIN_COSINE = 0.9
TEXTS = (
    "John Smith works for Acme Corp in New York.",
    "The weather in Paris was lovely yesterday, and Maria walked along the Seine!",
    "I didn't like the café at all: £45 for two coffees is too much.",
)
QUESTION = {"question": "Where does John work?", "context": TEXTS[0]}


@dataclass(frozen=True)
class TaskBuild:
    arch: str
    task: str
    folder: Path  # the Hugging Face folder
    work: Path  # model directories: work/quantized/{fp32,int8}, work/neuron
    packages: Path  # <variant>/model.tar.gz

    @property
    def name(self) -> str:
        return f"{self.arch}-{self.task}"

    def model_dir(self, variant: str) -> Path:
        return self.work / "neuron" if variant == "neuron" else self.work / "quantized" / variant


def build(root: Path, arch: str, task: str) -> TaskBuild:
    from sagebox.pipeline.build_all import build_all

    folder = make_model_folder(root / "hf" / f"{arch}-{task}", arch, task)
    work, packages = root / "work" / f"{arch}-{task}", root / "packages" / f"{arch}-{task}"
    neuron = (arch, task) in WITH_NEURON
    openvino = (arch, task) in WITH_OPENVINO
    build_all(
        folder,
        None,
        work,
        packages,
        max_drop=TINY_MAX_DROP,
        min_cosine=TINY_MIN_COSINE,
        neuron=neuron,
        openvino=openvino,
    )
    return TaskBuild(arch, task, folder, work, packages)


def build_every(root: Path) -> dict[tuple[str, str], TaskBuild]:
    return {(arch, task): build(root, arch, task) for arch in ARCHS for task in TASKS}


# --- what transformers answers -------------------------------------------------------------------------------------


def _quiet() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*fallback heuristic.*")


def reference(folder: Path, task: str, inputs: Sequence[str], parameters: dict[str, Any] | None = None) -> Any:
    """The pipeline's answer to a list of texts (a list, one answer per text), the way the inference toolkit calls
    it (`pipeline(inputs, **parameters)`); feature-extraction: each text's mean-pooled, normalised embedding."""
    from transformers import pipeline

    _quiet()
    parameters = dict(parameters or {})
    if task == "feature-extraction":
        return [embed(folder, text) for text in inputs]
    answer: Any
    if task == "token-classification":
        strategy = parameters.pop("aggregation_strategy", "simple")
        answer = pipeline("token-classification", model=str(folder), aggregation_strategy=strategy)(
            list(inputs), **parameters
        )
    else:
        answer = pipeline("text-classification", model=str(folder))(list(inputs), **parameters)
    return _plain(answer)


def embed(folder: Path, text: str) -> list[float]:
    """sentence-transformers' recipe on the folder's encoder: mean pooling over the mask, then L2 normalisation."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    _quiet()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    encoded = tokenizer(text, return_tensors="pt", truncation=True, max_length=128)
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return [float(v) for v in torch.nn.functional.normalize(pooled, dim=-1)[0]]


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers, recursively (the pipeline returns float32 scores)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


# --- comparing -------------------------------------------------------------------------------------------------------


def assert_same(task: str, got: Any, expected: Any, *, score_tolerance: float = 1e-4, cosine: float = 0.9999) -> None:
    """A served answer (JSON) equals the pipeline's: everything exact but scores (within `score_tolerance`) and
    embeddings (cosine at least `cosine`)."""
    if task == "feature-extraction":
        for a, b in zip(got, expected, strict=True):
            va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
            similarity = float(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb))
            assert similarity >= cosine, f"cosine {similarity} < {cosine}"
        return
    _same_structure(got, expected, score_tolerance, "answer")


def _same_structure(got: Any, expected: Any, tolerance: float, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{where}: {got} != {expected}"
        for key in expected:
            _same_structure(got[key], expected[key], tolerance, f"{where}.{key}")
        return
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: {got} != {expected}"
        for index, (a, b) in enumerate(zip(got, expected, strict=True)):
            _same_structure(a, b, tolerance, f"{where}[{index}]")
        return
    if isinstance(expected, float) and where.endswith(".score"):
        assert abs(float(got) - expected) <= tolerance, f"{where}: {got} != {expected}"
        return
    assert got == expected, f"{where}: {got!r} != {expected!r}"
