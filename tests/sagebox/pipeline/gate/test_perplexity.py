"""Perplexity through the serving engine equals transformers' own (its "perplexity of fixed-length models" recipe:
windows with a stride, labels -100 where a token was predicted before), and the windows predict each token once."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer

from container.manifest import ManifestError
from sagebox.errors import SageboxError
from sagebox.pipeline.data import builtin
from sagebox.pipeline.export.generation import build_generation
from sagebox.pipeline.gate.perplexity import evaluate_perplexity, model_dir_perplexity, windows
from tests.causal_models import causal_folder
from tests.container.generation.tiny_decoders import tiny_decoder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("perplexity")


def _built(root: Path, kind: str) -> tuple[Path, Path]:
    folder, model_dir = root / f"hf-{kind}", root / f"fp32-{kind}"
    if not model_dir.exists():
        build_generation(causal_folder(folder, kind), model_dir)
    return folder, model_dir


def transformers_perplexity(model: Any, encodings: list[list[int]], context: int, stride: int) -> float:
    """The recipe of transformers' perplexity guide, summed over texts: labels -100 except for the tokens the window
    adds; the model's mean loss over a window times the tokens it predicts."""
    total, count = 0.0, 0
    for ids in encodings:
        input_ids = torch.tensor([ids])
        length, previous_end = len(ids), 0
        for begin in range(0, length, stride):
            end = min(begin + context, length)
            target_length = end - previous_end
            window = input_ids[:, begin:end]
            labels = window.clone()
            labels[:, :-target_length] = -100
            predicted = int((labels[:, 1:] != -100).sum())  # the model shifts the labels left by one
            if predicted:
                with torch.no_grad():
                    loss = model(window, labels=labels).loss
                total, count = total + float(loss) * predicted, count + predicted
            previous_end = end
            if end == length:
                break
    return math.exp(total / count)


@pytest.mark.parametrize(("kind", "context", "stride"), [("llama", 32, 16), ("gpt2", 24, 5), ("opt", 256, 128)])
def test_perplexity_through_the_engine_equals_transformers(root: Path, kind: str, context: int, stride: int) -> None:
    folder, model_dir = _built(root, kind)
    texts = builtin.heldout_texts()[:3]
    ours = model_dir_perplexity(model_dir, texts, context=context, stride=stride, data="three paragraphs")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    encodings = [tokenizer(text)["input_ids"] for text in texts]
    theirs = transformers_perplexity(tiny_decoder(kind), encodings, context, stride)
    assert ours.perplexity == pytest.approx(theirs, rel=1e-3)
    predicted = sum(len(encoding) - 1 for encoding in encodings)
    assert (ours.tokens, ours.texts, ours.context, ours.stride) == (predicted, 3, context, stride)
    assert ours.nll == pytest.approx(math.log(ours.perplexity))
    assert 1 < ours.perplexity < 96 * 5  # a random 96-token model: near the vocabulary, far from certain


def test_by_default_the_builtin_text_in_windows_of_the_context(root: Path) -> None:
    _, model_dir = _built(root, "llama")
    result = model_dir_perplexity(model_dir)
    assert (result.texts, result.context, result.stride) == (len(builtin.heldout_texts()), 256, 128)
    assert result.data.startswith("Sagebox's built-in held-out text")
    assert result.summary()["perplexity"] == round(result.perplexity, 4)
    evaluation = evaluate_perplexity(model_dir)
    assert evaluation.metrics == {"perplexity": result.perplexity}
    assert (evaluation.variant, evaluation.runtime, evaluation.count) == ("fp32", "torch", result.texts)
    assert evaluation.outputs == result


def test_bad_windows_and_texts_are_one_line(root: Path) -> None:
    _, model_dir = _built(root, "llama")
    with pytest.raises(SageboxError, match="window must be 2 to 256 tokens"):
        model_dir_perplexity(model_dir, ["some text"], context=512)
    with pytest.raises(SageboxError, match="stride must be 1 to the window"):
        model_dir_perplexity(model_dir, ["some text here"], context=8, stride=9)
    with pytest.raises(SageboxError, match="nothing to predict"):
        model_dir_perplexity(model_dir, ["", ""], data="empty lines")  # BOS alone: one token


@pytest.mark.parametrize(("length", "context", "stride"), [(1, 4, 2), (2, 4, 2), (10, 4, 2), (11, 4, 3), (10, 10, 5)])
def test_windows_predict_every_token_after_the_first_once(length: int, context: int, stride: int) -> None:
    found = windows(length, context, stride)
    predicted = [token for begin, end, first in found for token in range(first, end)]
    assert predicted == list(range(1, length))
    assert all(end - begin <= context and begin < first for begin, end, first in found)


def test_a_stride_of_a_whole_window_leaves_each_window_first_token_unpredicted() -> None:
    assert windows(10, 4, 4) == [(0, 4, 1), (4, 8, 5), (8, 10, 9)]  # as transformers' recipe scores them
    with pytest.raises(SageboxError):
        windows(10, 1, 1)


def test_a_directory_that_is_not_text_generation_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError) as error:
        model_dir_perplexity(tiny_model_dir)
    assert "holds a question-answering model" in str(error.value)
    with pytest.raises(ManifestError, match="does not exist"):
        model_dir_perplexity(tmp_path / "absent")
