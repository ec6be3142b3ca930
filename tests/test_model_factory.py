"""The test model factory: every arch x task folder loads in transformers (pipeline or Auto classes) and answers,
builds are byte-identical, the trained RoBERTa tokenizer is deterministic with RoBERTa's ids and offsets, and the
sentence-transformers layout gives what sentence-transformers computes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.model_factory import (
    ARCHS,
    NER_LABELS,
    SENTIMENT_LABELS,
    TASKS,
    TOPIC_LABELS,
    make_model_folder,
    roberta_tokenizer_json,
    train_roberta_tokenizer,
)

REPO = Path(__file__).resolve().parents[1]
TEXTS = (
    "Maria Lopez works for the Red Cross in Nairobi.",
    "Barcelona beat Valencia 3-1 on Saturday.",
    "Prices rose by 3.5% in May, the ministry said.",
)
QUESTION = "Where does Maria Lopez work?"
CONTEXT = "Maria Lopez moved from Lisbon to Nairobi in March 2019 to run the clinic of the Red Cross."


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("factory")
    return {(arch, task): make_model_folder(root / f"{arch}-{task}", arch, task) for arch in ARCHS for task in TASKS}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def _quiet_transformers() -> Any:
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def _answer(folder: Path) -> str:
    """Extractive QA on the folder. transformers 5 removed the question-answering pipeline, so the span is decoded
    here (argmax start, best end at or after it, within the context) the way that pipeline did."""
    transformers = _quiet_transformers()
    if "question-answering" in transformers.pipelines.SUPPORTED_TASKS:  # pragma: no cover - transformers < 5
        return str(transformers.pipeline("question-answering", model=str(folder))(question=QUESTION, context=CONTEXT))
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(str(folder)).eval()
    encoded = tokenizer(QUESTION, CONTEXT, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0].tolist()
    in_context = torch.tensor([sequence == 1 for sequence in encoded.sequence_ids(0)])
    with torch.no_grad():
        output = model(**encoded)
    start_logits = output.start_logits[0].masked_fill(~in_context, -torch.inf)
    start = int(start_logits.argmax())
    end_logits = output.end_logits[0].masked_fill(~in_context, -torch.inf)
    end = start + int(end_logits[start:].argmax())
    return CONTEXT[offsets[start][0] : offsets[end][1]]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("task", TASKS)
def test_every_folder_loads_and_answers(folders: dict[tuple[str, str], Path], arch: str, task: str) -> None:
    folder = folders[arch, task]
    transformers = _quiet_transformers()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert tokenizer.is_fast and tokenizer.model_max_length == 512
    if task == "question-answering":
        answer = _answer(folder)
        assert answer and answer in CONTEXT
        return
    pipe = transformers.pipeline(task, model=str(folder))
    if task == "text-classification":
        results = pipe(list(TEXTS), top_k=None)
        for scores in results:
            assert sorted(score["label"] for score in scores) == sorted(SENTIMENT_LABELS)
            assert sum(score["score"] for score in scores) == pytest.approx(1.0, abs=1e-5)
            assert scores[0]["score"] - scores[1]["score"] > 1e-3  # decisive, not near-uniform
    elif task == "token-classification":
        results = pipe(list(TEXTS), ignore_labels=[])
        for text, tokens in zip(TEXTS, results, strict=True):
            assert tokens and {token["entity"] for token in tokens} <= set(NER_LABELS)
            assert all(0 <= token["start"] < token["end"] <= len(text) for token in tokens)
    else:
        features = pipe(TEXTS[0])
        assert len(features[0]) == len(tokenizer(TEXTS[0])["input_ids"])
        assert {len(row) for row in features[0]} == {32}


def test_multi_label_classification_scores_each_topic_alone(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "topics", "distilbert", "text-classification", multi_label=True)
    config = json.loads((folder / "config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert [config["id2label"][str(i)] for i in range(len(TOPIC_LABELS))] == list(TOPIC_LABELS)
    scores = _quiet_transformers().pipeline("text-classification", model=str(folder))(TEXTS[1], top_k=None)
    assert sorted(score["label"] for score in scores) == sorted(TOPIC_LABELS)
    assert sum(score["score"] for score in scores) != pytest.approx(1.0, abs=1e-3)  # sigmoids, not a softmax


def test_configs_are_tiny_with_the_task_labels(folders: dict[tuple[str, str], Path]) -> None:
    bert = json.loads((folders["bert", "token-classification"] / "config.json").read_text())
    assert (bert["hidden_size"], bert["num_hidden_layers"], bert["num_attention_heads"]) == (32, 2, 4)
    assert (bert["intermediate_size"], bert["max_position_embeddings"]) == (64, 512)
    assert bert["label2id"] == {label: i for i, label in enumerate(NER_LABELS)}
    distil = json.loads((folders["distilbert", "text-classification"] / "config.json").read_text())
    assert (distil["dim"], distil["hidden_dim"], distil["n_heads"], distil["n_layers"]) == (32, 64, 4, 2)
    assert distil["label2id"] == {label: i for i, label in enumerate(SENTIMENT_LABELS)}
    roberta = json.loads((folders["roberta", "feature-extraction"] / "config.json").read_text())
    assert (roberta["max_position_embeddings"], roberta["pad_token_id"], roberta["type_vocab_size"]) == (514, 1, 1)
    assert 1000 <= roberta["vocab_size"] <= 2000
    assert roberta["architectures"] == ["RobertaModel"]
    card = (folders["roberta", "feature-extraction"] / "README.md").read_text()
    assert card.startswith("---\nlicense: mit\n---\n")


def test_same_arguments_give_identical_bytes_and_seeds_differ(tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {"dense_out": 8, "pooling": "cls", "license": "apache-2.0"}
    first = _files(make_model_folder(tmp_path / "a", "roberta", "feature-extraction", **kwargs))
    second = _files(make_model_folder(tmp_path / "b", "roberta", "feature-extraction", **kwargs))
    assert first == second
    assert "2_Dense/model.safetensors" in first
    other = _files(make_model_folder(tmp_path / "c", "roberta", "feature-extraction", seed=1, **kwargs))
    assert other["model.safetensors"] != first["model.safetensors"]
    assert other["tokenizer.json"] == first["tokenizer.json"]
    for arch in ("bert", "distilbert"):
        one = _files(make_model_folder(tmp_path / f"{arch}-1", arch, "text-classification"))
        assert one == _files(make_model_folder(tmp_path / f"{arch}-2", arch, "text-classification"))


def test_build_is_atomic_replaces_and_leaves_the_callers_rng_alone(tmp_path: Path) -> None:
    out = tmp_path / "model"
    out.mkdir()
    (out / "stale.txt").write_text("old build")
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    make_model_folder(out, "bert", "question-answering", seed=7)
    assert torch.equal(torch.rand(3), expected)
    assert not (out / "stale.txt").exists() and (out / "model.safetensors").is_file()
    assert [path.name for path in tmp_path.iterdir()] == ["model"]  # no staging or old folder left behind
    with pytest.raises(ValueError, match="arch 'gpt2'"):
        make_model_folder(tmp_path / "bad", "gpt2", "question-answering")
    with pytest.raises(ValueError, match="pooling 'sum'"):
        make_model_folder(tmp_path / "bad", "bert", "feature-extraction", pooling="sum")
    assert not (tmp_path / "bad").exists()


def test_sentence_transformers_layout(tmp_path: Path) -> None:
    folder = make_model_folder(tmp_path / "st", "bert", "feature-extraction", dense_out=16, max_seq_length=64)
    modules = json.loads((folder / "modules.json").read_text())
    assert [(m["path"], m["type"].rsplit(".", 1)[1]) for m in modules] == [
        ("", "Transformer"),
        ("1_Pooling", "Pooling"),
        ("2_Dense", "Dense"),
        ("3_Normalize", "Normalize"),
    ]
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["word_embedding_dimension"] == 32 and pooling["pooling_mode_mean_tokens"] is True
    assert json.loads((folder / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": 64,
        "do_lower_case": False,
    }
    dense = json.loads((folder / "2_Dense" / "config.json").read_text())
    assert (dense["in_features"], dense["out_features"], dense["bias"]) == (32, 16, True)
    plain = make_model_folder(tmp_path / "plain", "bert", "feature-extraction", sentence_transformers=False)
    assert not (plain / "modules.json").exists() and not (plain / "1_Pooling").exists()
    cls = make_model_folder(tmp_path / "cls", "distilbert", "feature-extraction", pooling="cls", normalize=False)
    assert [m["path"] for m in json.loads((cls / "modules.json").read_text())] == ["", "1_Pooling"]
    assert json.loads((cls / "1_Pooling" / "config.json").read_text())["pooling_mode_cls_token"] is True


def test_roberta_tokenizer_is_robertas_and_round_trips_offsets(folders: dict[tuple[str, str], Path]) -> None:
    tokenizer = _quiet_transformers().AutoTokenizer.from_pretrained(str(folders["roberta", "token-classification"]))
    assert type(tokenizer).__name__ in ("RobertaTokenizer", "RobertaTokenizerFast") and tokenizer.is_fast
    ids = [tokenizer.convert_tokens_to_ids(token) for token in ("<s>", "<pad>", "</s>", "<unk>")]
    assert ids == [0, 1, 2, 3]
    text = "Dr. Amara Okafor (Lagos) paid $1,250 for 3 tickets — isn't that odd?"
    encoded = tokenizer(text, return_offsets_mapping=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert tokens[0] == "<s>" and tokens[-1] == "</s>"
    assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == text
    # Byte tokens of one character (the dash) share its offsets: decode each offset's tokens together.
    groups: dict[tuple[int, int], list[int]] = {}
    for token_id, (start, end) in zip(encoded["input_ids"][1:-1], encoded["offset_mapping"][1:-1], strict=True):
        groups.setdefault((start, end), []).append(token_id)
    assert len(groups) < len(encoded["input_ids"]) - 2  # the dash did take several byte tokens
    for (start, end), group in groups.items():
        assert text[start:end] == tokenizer.decode(group).lstrip(" ")  # offsets trimmed of the leading space
    assert "".join(text[start:end] for start, end in groups) == text.replace(" ", "")
    assert tokenizer(" Lagos")["input_ids"] != tokenizer("Lagos")["input_ids"]  # no prefix space added
    pair = tokenizer("Lagos", "Accra")["input_ids"]
    assert pair[0] == 0 and pair.count(2) == 3 and pair[pair.index(2) + 1] == 2  # <s> A </s></s> B </s>


def test_roberta_tokenizer_training_is_deterministic_across_processes() -> None:
    cached = roberta_tokenizer_json()
    assert train_roberta_tokenizer() == cached
    code = "import hashlib; from tests.model_factory import train_roberta_tokenizer as t; "
    code += "print(hashlib.sha256(t().encode()).hexdigest())"
    printed = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert printed.stdout.strip() == hashlib.sha256(cached.encode()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_sentence_transformers_gives_mean_pooled_normalised_embeddings(
    folders: dict[tuple[str, str], Path], arch: str, tmp_path: Path
) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")  # slow import (~12 s), once per session
    transformers = _quiet_transformers()
    folder = folders[arch, "feature-extraction"]
    embeddings = sentence_transformers.SentenceTransformer(str(folder), device="cpu").encode(
        list(TEXTS), convert_to_tensor=True
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    encoded = tokenizer(list(TEXTS), padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    expected = torch.nn.functional.normalize(pooled, dim=-1)
    assert torch.nn.functional.cosine_similarity(embeddings.cpu(), expected, dim=-1).min() > 0.9999
    # With a Dense layer: CLS pooling, then tanh(linear), unnormalised (the Dense weights are the ones saved).
    dense_folder = make_model_folder(
        tmp_path / "dense", arch, "feature-extraction", pooling="cls", dense_out=8, normalize=False
    )
    from safetensors.torch import load_file

    dense = load_file(str(dense_folder / "2_Dense" / "model.safetensors"))
    expected_dense = torch.tanh(hidden[:, 0] @ dense["linear.weight"].T + dense["linear.bias"])
    got = sentence_transformers.SentenceTransformer(str(dense_folder), device="cpu").encode(
        list(TEXTS), convert_to_tensor=True
    )
    assert torch.allclose(got.cpu(), expected_dense, atol=1e-5)
