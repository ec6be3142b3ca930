"""Fine-tune an extractive-QA model on labelled SQuAD examples (CPU, a few minutes for a small encoder)."""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tokenizers import Tokenizer
from torch import nn

from sagebox.pipeline.data.squad import QAExample


@dataclass(frozen=True)
class TrainRecipe:
    epochs: float = 1.0
    batch_size: int = 32
    learning_rate: float = 1e-4
    head_learning_rate: float = 1e-3
    warmup_fraction: float = 0.1
    weight_decay: float = 0.01
    max_length: int = 192
    # Embeddings and the lowest encoder layers stay frozen: backward stops early, so a step costs far less.
    frozen_layers: int = 3
    # Dropout costs as much as a third of a CPU training step and buys little in a one-epoch fine-tune.
    dropout: float = 0.0
    seed: int = 0
    # Overlap of consecutive windows over a context longer than max_length; training uses a window holding the answer.
    doc_stride: int = 64
    # "bf16": matmuls under torch.autocast(bfloat16), weights and optimizer state stay FP32. Measured on the 2-core
    # Xeon (AMX, AVX512-BF16) dev machine: 0.43 s vs 2.4 s per step (batch 16 x 128 tokens, 3 layers frozen).
    # Where oneDNN has no BF16 support the step runs in FP32 (TrainStats.precision says which).
    precision: str = "fp32"
    # Attention kernel for the training steps (Hugging Face `attn_implementation`), the model's own restored after;
    # serving exports the weights and does not use it. "eager" (matmul + softmax): on the 2-core Xeon (AMX), the
    # CPU flash-attention kernel that "sdpa" picks took 41 ms per layer for its backward against 6 ms forward, 43%
    # of a BF16 step; eager took a step (batch 16, MiniLM-L6, 384-token windows) from ~0.55 s to ~0.40 s.
    attention: str = "eager"
    # Which gold answer a question with several trains on: "first" as listed, or "shortest", the tightest cut of
    # the place ("16,000" of "16,000 species", "Anwen Pryce" of "deputy leader Anwen Pryce"), as SQuAD marks it.
    answer: str = "first"


@dataclass(frozen=True)
class TrainFeature:
    input_ids: list[int]
    token_type_ids: list[int]
    start: int
    end: int


@dataclass(frozen=True)
class TrainStats:
    steps: int
    examples: int
    skipped: int
    seconds: float
    final_loss: float
    precision: str = "fp32"
    cpu_seconds: float = 0.0  # user + system CPU time of the training loop (all threads)


def featurize_for_training(
    tokenizer: Tokenizer,
    examples: Sequence[QAExample],
    max_length: int,
    doc_stride: int = 64,
    answer: str = "first",
) -> tuple[list[TrainFeature], int]:
    """One feature per example: the first window (of max_length tokens, overlapping by doc_stride) that holds its
    training answer whole (the first gold answer, or the shortest with answer="shortest"); also returns how many
    examples had no such window and were skipped."""
    tok = Tokenizer.from_str(tokenizer.to_str())
    tok.no_padding()
    tok.enable_truncation(max_length=max_length, strategy="only_second", stride=doc_stride)
    features: list[TrainFeature] = []
    skipped = 0
    for example in examples:
        gold = example.answers[0] if answer == "first" else min(example.answers, key=lambda a: len(a.text))
        encoding = tok.encode(example.question, example.context)
        for window in [encoding, *encoding.overflowing]:
            span = answer_tokens(window.sequence_ids, window.offsets, gold.start, gold.start + len(gold.text))
            if span is not None:
                features.append(TrainFeature(list(window.ids), list(window.type_ids), span[0], span[1]))
                break
        else:
            skipped += 1
    return features, skipped


def answer_tokens(
    sequence_ids: Sequence[int | None], offsets: Sequence[tuple[int, int]], char_start: int, char_end: int
) -> tuple[int, int] | None:
    """First and last context token overlapping [char_start, char_end); None unless the span is all there."""
    context = [i for i, sid in enumerate(sequence_ids) if sid == 1]
    if not context or offsets[context[0]][0] > char_start or offsets[context[-1]][1] < char_end:
        return None
    start = next((i for i in context if offsets[i][1] > char_start), None)
    end = next((i for i in reversed(context) if offsets[i][0] < char_end), None)
    if start is None or end is None or end < start:
        return None
    return start, end


def _batches(features: list[TrainFeature], batch_size: int, rng: random.Random) -> list[list[TrainFeature]]:
    """Shuffled batches of similar lengths (less padding): sort within shuffled pools of 32 batches."""
    order = list(features)
    rng.shuffle(order)
    pool = batch_size * 32
    batches: list[list[TrainFeature]] = []
    for i in range(0, len(order), pool):
        part = sorted(order[i : i + pool], key=lambda f: len(f.input_ids))
        batches += [part[j : j + batch_size] for j in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def bf16_supported() -> bool:
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def _collate(batch: list[TrainFeature], pad_id: int) -> dict[str, torch.Tensor]:
    width = max(len(f.input_ids) for f in batch)
    ids = np.full((len(batch), width), pad_id, dtype=np.int64)
    types = np.zeros((len(batch), width), dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for row, f in enumerate(batch):
        n = len(f.input_ids)
        ids[row, :n] = f.input_ids
        types[row, :n] = f.token_type_ids
        mask[row, :n] = 1
    return {
        "input_ids": torch.from_numpy(ids),
        "token_type_ids": torch.from_numpy(types),
        "attention_mask": torch.from_numpy(mask),
        "start_positions": torch.tensor([f.start for f in batch]),
        "end_positions": torch.tensor([f.end for f in batch]),
    }


def train_qa(
    model: nn.Module,
    tokenizer: Tokenizer,
    examples: Sequence[QAExample],
    recipe: TrainRecipe,
    progress: Callable[[int, int, float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> TrainStats:
    """Train a Hugging Face *ForQuestionAnswering model in place; returns it in eval mode."""
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    if recipe.precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, not {recipe.precision!r}")
    if recipe.attention not in ("eager", "sdpa"):
        raise ValueError(f"attention must be eager or sdpa, not {recipe.attention!r}")
    if recipe.answer not in ("first", "shortest"):
        raise ValueError(f"answer must be first or shortest, not {recipe.answer!r}")
    precision = "bf16" if recipe.precision == "bf16" and bf16_supported() else "fp32"
    features, skipped = featurize_for_training(tokenizer, examples, recipe.max_length, recipe.doc_stride, recipe.answer)
    if not features:
        raise ValueError("no training example has an answer inside the training window")
    pad_id = tokenizer.token_to_id("[PAD]") or 0
    head = [p for n, p in model.named_parameters() if n.startswith("qa_outputs")]
    body = [p for n, p in model.named_parameters() if not n.startswith("qa_outputs")]
    frozen = (".embeddings.", *(f".encoder.layer.{i}." for i in range(recipe.frozen_layers)))
    for name, param in model.named_parameters():
        if any(part in f".{name}" for part in frozen):
            param.requires_grad_(False)
    for layer in model.modules():
        if isinstance(layer, nn.Dropout):
            layer.p = recipe.dropout
    body = [p for p in body if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [{"params": body, "lr": recipe.learning_rate}, {"params": head, "lr": recipe.head_learning_rate}],
        weight_decay=recipe.weight_decay,
        # One fused kernel over every parameter: the optimizer step fell from ~30 ms to ~10 ms on 2 cores.
        fused=True,
    )
    steps_per_epoch = math.ceil(len(features) / recipe.batch_size)
    total = max(1, round(steps_per_epoch * recipe.epochs))
    warmup = max(1, int(total * recipe.warmup_fraction))

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    own_attention = _attention(model)
    _set_attention(model, recipe.attention)
    model.train()
    started, cpu_started = clock(), _cpu_seconds()
    step, loss_value = 0, float("nan")
    try:
        while step < total:
            for batch in _batches(features, recipe.batch_size, rng):
                if step >= total:
                    break
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                    out = model(**_collate(batch, pad_id), return_dict=True)
                out.loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                loss_value = float(out.loss.detach())
                step += 1
                if progress is not None:
                    progress(step, total, loss_value)
    finally:
        _set_attention(model, own_attention)
        model.eval()
    return TrainStats(
        step, len(features), skipped, clock() - started, loss_value, precision, _cpu_seconds() - cpu_started
    )


def _attention(model: nn.Module) -> str | None:
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None)


def _set_attention(model: nn.Module, name: str | None) -> None:
    setter = getattr(model, "set_attn_implementation", None)  # Hugging Face models have it
    if name is not None and setter is not None and _attention(model) != name:
        setter(name)


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system
