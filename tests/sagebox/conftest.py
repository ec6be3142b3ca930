"""Pipeline test fixtures: generated SQuAD data, a tiny model whose INT8 accuracy can be broken."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sagebox.demo.synth_squad import BIOGRAPHY, generate
from sagebox.paths import REPO
from sagebox.pipeline.data.squad import GoldAnswer, QAExample, write_squad
from tests.run_once import run_once

# The tiny random model's spans are near ties that INT8 noise can flip (a flip costs ~2.5 F1 on ~40 questions);
# a broken recipe (per-tensor weights on the outlier head) loses more than 20.
TINY_MODEL_MAX_F1_DROP = 5.0


@pytest.fixture(scope="session")
def dev_examples() -> list[QAExample]:
    return generate(24, 11, "dev")


@pytest.fixture(scope="session")
def dev_json(dev_examples: list[QAExample], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "dev.json"
    write_squad(dev_examples, path)
    return path


def make_outlier_head(src: Path, dst: Path) -> Path:
    """Copy of a QA folder whose start-logit row is 300x the end-logit row.

    Per-channel INT8 keeps both rows; per-tensor INT8 rounds the end row to nothing, which breaks answers.
    """
    import torch
    from transformers import BertForQuestionAnswering

    shutil.copytree(src, dst)
    model = BertForQuestionAnswering.from_pretrained(str(dst))
    with torch.no_grad():
        model.qa_outputs.weight[0] *= 300.0
        model.qa_outputs.weight *= 20.0
    model.save_pretrained(str(dst))
    return dst


@pytest.fixture(scope="session")
def outlier_hf_folder(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_once(tmp_path_factory, "outlier", lambda folder: make_outlier_head(tiny_hf_folder, folder / "outlier"))


@pytest.fixture(scope="session")
def self_consistent_json(outlier_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Questions whose gold answers are the FP32 model's own answers: FP32 scores 100 by construction,
    so any F1 the INT8 model loses is quantization error."""

    return run_once(tmp_path_factory, "self-consistent", lambda root: _self_consistent(outlier_hf_folder, root))


def _self_consistent(outlier_hf_folder: Path, root: Path) -> Path:
    from sagebox.pipeline.export.servable import build_fp32
    from sagebox.pipeline.gate.evaluate import evaluate_model_dir
    from sagebox.pipeline.gate.squad_metric import normalize_answer

    # Biography facts only: short spans, so a tiny random model's answers are not near-ties INT8 noise can flip.
    examples = generate(40, 5, "dev", BIOGRAPHY)
    build_fp32(outlier_hf_folder, root / "fp32")
    predictions = evaluate_model_dir(root / "fp32", examples).predictions
    # A gold answer must keep a word after SQuAD's normalization: an answer that is only punctuation or an article
    # ("£", "the") scores F1 0 even against itself, so FP32 would not score 100.
    gold = [
        QAExample(e.id, e.question, e.context, (GoldAnswer(predictions[e.id], e.context.find(predictions[e.id])),))
        for e in examples
        if normalize_answer(predictions[e.id])
    ]
    assert len(gold) >= 30
    write_squad(gold, root / "gold.json")
    return root / "gold.json"


@dataclass(frozen=True)
class Built:
    """What one `sagebox build` of the tiny model folder produced (shared by the build and box tests)."""

    args: tuple[str, ...]
    work: Path
    out: Path
    result: subprocess.CompletedProcess[str]


def sagebox_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `sagebox` command as a user runs it (a new process)."""
    return subprocess.run(
        [sys.executable, "-m", "sagebox", *args], cwd=REPO, capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="session")
def built(tiny_hf_folder: Path, dev_json: Path, tmp_path_factory: pytest.TempPathFactory) -> Built:
    def make(root: Path) -> Built:
        work, out = root / "work", root / "models"
        args = (
            "build",
            "--model",
            str(tiny_hf_folder),
            "--eval",
            str(dev_json),
            "--work",
            str(work),
            "--out",
            str(out),
        )
        return Built(args, work, out, sagebox_cli(*args))

    return run_once(tmp_path_factory, "sagebox-build", make)
