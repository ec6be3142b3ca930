"""What a folder is for: the task from its architecture or sentence-transformers files, forced tasks checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.pipeline.load.hf_model import EmbeddingModule, LogitsModule, load_task_module
from sagebox.pipeline.load.hf_task import detect_task
from tests.model_factory import NER_LABELS, SENTIMENT_LABELS, TOPIC_LABELS, make_model_folder


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf-task")


def test_heads_name_their_task_and_labels(root: Path) -> None:
    qa = detect_task(make_model_folder(root / "qa", "bert", "question-answering"))
    assert (qa.task, qa.architecture, qa.labels) == ("question-answering", "BertForQuestionAnswering", None)
    cls = detect_task(make_model_folder(root / "cls", "distilbert", "text-classification"))
    assert cls.task == "text-classification" and cls.labels == SENTIMENT_LABELS
    assert cls.problem_type == "single_label_classification"
    multi = detect_task(make_model_folder(root / "multi", "roberta", "text-classification", multi_label=True))
    assert multi.labels == TOPIC_LABELS and multi.problem_type == "multi_label_classification"
    assert multi.max_length == 512  # RoBERTa's 514 positions start after the pad id
    ner = detect_task(make_model_folder(root / "ner", "roberta", "token-classification"))
    assert ner.task == "token-classification" and ner.labels == NER_LABELS


def test_sentence_transformers_files_declare_pooling_dense_and_normalisation(root: Path) -> None:
    plain = detect_task(make_model_folder(root / "plain", "bert", "feature-extraction", sentence_transformers=False))
    assert plain.task == "feature-extraction" and plain.pooling is not None
    assert (plain.pooling.modes, plain.pooling.normalize, plain.pooling.dimension) == (["mean"], False, 32)
    assert plain.pooling.source.startswith("default: mean pooling")
    st = detect_task(
        make_model_folder(root / "st", "bert", "feature-extraction", pooling="cls", dense_out=16, max_seq_length=96)
    )
    assert st.pooling is not None and st.pooling.modes == ["cls"] and st.pooling.normalize
    assert st.pooling.dimension == 16 and st.pooling.dense_layers == 1 and st.max_length == 96
    module = load_task_module(st)
    assert isinstance(module, EmbeddingModule) and len(module.dense) == 1


def test_a_forced_task_the_folder_has_no_head_for_is_one_clear_line(root: Path) -> None:
    qa = make_model_folder(root / "qa2", "bert", "question-answering")
    with pytest.raises(SageboxError) as err:
        detect_task(qa, "text-classification")
    message = str(err.value)
    assert (
        "\n" not in message
        and "BertForQuestionAnswering" in message
        and "untrained text-classification head" in message
    )
    encoder = make_model_folder(root / "enc", "distilbert", "feature-extraction")
    with pytest.raises(SageboxError, match=r"an encoder without a task head.*--task feature-extraction"):
        detect_task(encoder, "token-classification")
    with pytest.raises(SageboxError, match="unknown task 'summarization'"):
        detect_task(qa, "summarization")


def test_any_encoder_may_be_forced_to_embed(root: Path) -> None:
    info = detect_task(make_model_folder(root / "cls2", "bert", "text-classification"), "feature-extraction")
    assert info.task == "feature-extraction" and info.notes and "head is not used" in info.notes[0]
    assert isinstance(load_task_module(info), EmbeddingModule)


def test_a_head_missing_from_the_weights_is_refused(root: Path) -> None:
    folder = Path(shutil.copytree(make_model_folder(root / "cls3", "bert", "text-classification"), root / "headless"))
    from safetensors.torch import load_file, save_file

    weights = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in weights.items() if not k.startswith("classifier.")}, str(folder / "model.safetensors"))
    info = detect_task(folder)
    with pytest.raises(
        SageboxError, match=r"lack its text-classification head \(classifier\.bias, classifier\.weight\)"
    ):
        load_task_module(info)
    assert isinstance(
        load_task_module(detect_task(make_model_folder(root / "ok", "bert", "text-classification"))), LogitsModule
    )


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"modules": [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.LSTM"}]}, "LSTM"),
        ({"pooling": {"pooling_mode_lasttoken": True, "pooling_mode_mean_tokens": False}}, "pooling_mode_lasttoken"),
        ({"pooling": {"pooling_mode_mean_tokens": False}}, "enables no pooling mode"),
    ],
)
def test_unsupported_sentence_transformers_modules_are_named(
    root: Path, change: dict[str, object], fragment: str
) -> None:
    folder = Path(
        shutil.copytree(make_model_folder(root / "st2", "bert", "feature-extraction"), root / f"st-{len(fragment)}")
    )
    if "modules" in change:
        (folder / "modules.json").write_text(json.dumps(change["modules"]))
    if "pooling" in change:
        config = json.loads((folder / "1_Pooling" / "config.json").read_text())
        config.update(change["pooling"])
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    with pytest.raises(SageboxError) as err:
        detect_task(folder)
    assert fragment in str(err.value)
