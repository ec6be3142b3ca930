from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from sagebox.demo.finetune import TrainRecipe, answer_tokens, featurize_for_training, train_qa
from sagebox.demo.synth_squad import BIOGRAPHY, generate
from sagebox.pipeline.data.squad import GoldAnswer, QAExample


def _tokenizer(folder: Path) -> Tokenizer:
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


def test_answer_tokens_cover_exactly_the_answer(tiny_hf_folder: Path) -> None:
    tok = _tokenizer(tiny_hf_folder)
    tok.no_padding()
    context = "Mount Renis rises 6,277 metres above sea level."
    start = context.index("6,277 metres")
    encoding = tok.encode("How high is Mount Renis?", context)
    span = answer_tokens(encoding.sequence_ids, encoding.offsets, start, start + len("6,277 metres"))
    assert span is not None
    i, j = span
    assert encoding.sequence_ids[i] == 1
    assert context[encoding.offsets[i][0] : encoding.offsets[j][1]] == "6,277 metres"


def test_a_far_answer_is_taken_from_a_later_window(tiny_hf_folder: Path) -> None:
    tok = _tokenizer(tiny_hf_folder)
    context = "filler " * 200 + "the answer"
    far = QAExample("1", "Where?", context, (GoldAnswer("answer", context.index("answer")),))
    near = QAExample("2", "Where?", "the answer is here", (GoldAnswer("answer", 4),))
    features, skipped = featurize_for_training(tok, [far, near], max_length=64, doc_stride=16)
    assert skipped == 0
    assert len(features) == 2
    for feature in features:
        assert len(feature.input_ids) <= 64
        assert tok.id_to_token(feature.input_ids[feature.start]) == "answer"
        assert feature.start == feature.end


def test_an_answer_longer_than_the_window_is_skipped(tiny_hf_folder: Path) -> None:
    context = "start " + "word " * 100 + "end"
    long = QAExample("1", "What?", context, (GoldAnswer(context, 0),))
    features, skipped = featurize_for_training(_tokenizer(tiny_hf_folder), [long], max_length=64, doc_stride=16)
    assert (features, skipped) == ([], 1)


def test_training_lowers_the_loss(tiny_hf_folder: Path) -> None:
    import torch
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(str(tiny_hf_folder))
    examples = generate(16, 0, "train", BIOGRAPHY)  # short facts, few enough to memorise
    tok = _tokenizer(tiny_hf_folder)
    losses: list[float] = []
    recipe = TrainRecipe(epochs=15, batch_size=8, learning_rate=3e-3, head_learning_rate=1e-2, frozen_layers=0)
    stats = train_qa(model, tok, examples, recipe, progress=lambda step, total, loss: losses.append(loss))
    assert stats.steps == 30 == len(losses)
    assert not model.training
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 * 0.8
    embeddings = dict(model.named_parameters())["bert.embeddings.word_embeddings.weight"]
    assert not embeddings.requires_grad  # embeddings stay frozen
    assert torch.isfinite(embeddings).all()


def test_bf16_autocast_trains_and_keeps_fp32_weights(tiny_hf_folder: Path) -> None:
    import torch
    from transformers import BertForQuestionAnswering

    from sagebox.demo.finetune import bf16_supported

    model = BertForQuestionAnswering.from_pretrained(str(tiny_hf_folder))
    examples = generate(16, 0, "train", BIOGRAPHY)
    losses: list[float] = []
    recipe = TrainRecipe(
        epochs=15, batch_size=8, learning_rate=3e-3, head_learning_rate=1e-2, frozen_layers=0, precision="bf16"
    )
    stats = train_qa(
        model, _tokenizer(tiny_hf_folder), examples, recipe, progress=lambda s, t, loss: losses.append(loss)
    )
    assert stats.precision == ("bf16" if bf16_supported() else "fp32")
    assert stats.cpu_seconds >= 0
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 * 0.8
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # what export and quantization expect


def test_unknown_precision_is_refused(tiny_hf_folder: Path) -> None:
    import pytest
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(str(tiny_hf_folder))
    with pytest.raises(ValueError, match="precision must be fp32 or bf16"):
        train_qa(model, _tokenizer(tiny_hf_folder), generate(4, 0), TrainRecipe(precision="fp16"))


def _train_on(folder: Path, attention: str) -> tuple[set[str], list[float], str]:
    """Kernels seen by the forward passes, the losses, and the model's kernel after training."""
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(str(folder), attn_implementation="sdpa")
    seen: set[str] = set()
    model.register_forward_pre_hook(lambda module, args: seen.add(module.config._attn_implementation))
    losses: list[float] = []
    recipe = TrainRecipe(epochs=2, batch_size=4, frozen_layers=0, attention=attention)
    train_qa(model, _tokenizer(folder), generate(8, 0, "train", BIOGRAPHY), recipe, lambda s, t, x: losses.append(x))
    return seen, losses, model.config._attn_implementation


def test_training_runs_on_the_recipes_attention_kernel_and_gives_the_models_back(tiny_hf_folder: Path) -> None:
    eager_seen, eager_losses, eager_after = _train_on(tiny_hf_folder, "eager")
    sdpa_seen, sdpa_losses, sdpa_after = _train_on(tiny_hf_folder, "sdpa")
    assert (eager_seen, sdpa_seen) == ({"eager"}, {"sdpa"})
    assert eager_after == sdpa_after == "sdpa"  # what the model was loaded with
    # The same arithmetic by two kernels: FP32 losses agree to rounding.
    assert eager_losses == pytest.approx(sdpa_losses, rel=1e-3)


def test_unknown_attention_is_refused_before_the_model_changes(tiny_hf_folder: Path) -> None:
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(str(tiny_hf_folder), attn_implementation="sdpa")
    with pytest.raises(ValueError, match="attention must be eager or sdpa"):
        train_qa(model, _tokenizer(tiny_hf_folder), generate(4, 0), TrainRecipe(attention="flash"))
    assert model.config._attn_implementation == "sdpa"


def test_batches_hold_similar_lengths_and_every_feature_once() -> None:
    import random

    from sagebox.demo.finetune import TrainFeature, _batches

    features = [TrainFeature([1] * n, [0] * n, 0, 0) for n in random.Random(0).choices(range(10, 200), k=1000)]
    batches = _batches(features, 16, random.Random(1))
    assert sorted(len(f.input_ids) for b in batches for f in b) == sorted(len(f.input_ids) for f in features)
    spread = [max(len(f.input_ids) for f in b) - min(len(f.input_ids) for f in b) for b in batches]
    assert sum(spread) / len(spread) < 30  # random batches of 16 from 10..200 spread ~150 tokens
    assert _batches(features, 16, random.Random(1)) == batches


def test_the_training_answer_is_the_first_gold_or_the_shortest(tiny_hf_folder: Path) -> None:
    tok = _tokenizer(tiny_hf_folder)
    context = "The colony holds about 16,000 species of moss."
    golds = tuple(GoldAnswer(t, context.index(t)) for t in ("about 16,000 species", "16,000", "16,000 species"))
    example = QAExample("1", "How many species does it hold?", context, golds)
    spans = {}
    for choice in ("first", "shortest"):
        (feature,), skipped = featurize_for_training(tok, [example], max_length=64, doc_stride=16, answer=choice)
        assert skipped == 0
        spans[choice] = tok.decode(feature.input_ids[feature.start : feature.end + 1])
    assert spans == {"first": "about 16, 000 species", "shortest": "16, 000"}


def test_unknown_answer_choice_is_refused(tiny_hf_folder: Path) -> None:
    from transformers import BertForQuestionAnswering

    model = BertForQuestionAnswering.from_pretrained(str(tiny_hf_folder))
    with pytest.raises(ValueError, match="answer must be first or shortest"):
        train_qa(model, _tokenizer(tiny_hf_folder), generate(4, 0), TrainRecipe(answer="longest"))
