"""A text-generation model directory's perplexity on held-out text, computed by the serving engine itself
(container/generation: the Decoder the server runs, on the weights and tokenizer.json the directory holds).

Each text is tokenized as the server tokenizes a prompt (the manifest's add_special_tokens) and scored in windows of
at most `context` tokens that start `stride` tokens apart (transformers' "perplexity of fixed-length models"): a window
predicts only the tokens no earlier window predicted, each from every token before it in the window: with a stride
below the window every token after a text's first is predicted once, with at least context - stride tokens of history
once the text is that long.
Perplexity is exp of the mean negative log-likelihood (nats) over all predicted tokens of all texts. Without texts of
the user's, Sagebox's built-in held-out paragraphs are used (data/builtin.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from container.generation.decoder import Decoder, KVCache, Segment
from container.generation.model import GenerationModel, load_generation_model
from container.manifest import Manifest, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.data import builtin
from sagebox.pipeline.gate.task_eval import TaskEvaluation

# Windows stop here even for a longer context: logits of a window take window x vocabulary floats (Qwen2's 152k
# vocabulary: 0.6 GB at 1,024 tokens), and the built-in texts are shorter than this anyway.
MAX_DEFAULT_CONTEXT = 1024


@dataclass(frozen=True)
class Perplexity:
    perplexity: float
    nll: float  # mean negative log-likelihood per predicted token, in nats
    tokens: int  # tokens predicted
    texts: int
    context: int  # the longest window, in tokens
    stride: int  # tokens between the starts of two windows
    data: str  # what was measured on, for reports

    def summary(self) -> dict[str, object]:
        return {
            "perplexity": round(self.perplexity, 4),
            "nll": round(self.nll, 6),
            "tokens": self.tokens,
            "texts": self.texts,
            "context": self.context,
            "stride": self.stride,
            "data": self.data,
        }


def windows(length: int, context: int, stride: int) -> list[tuple[int, int, int]]:
    """(begin, end, first) of each window over `length` tokens: tokens [begin, end) are fed, tokens [first, end) are
    predicted (each by the logits of the token before it)."""
    if context < 2:
        raise SageboxError(f"a perplexity window must hold at least 2 tokens, not {context}")
    if not 1 <= stride <= context:
        raise SageboxError(f"the perplexity stride must be 1 to the window ({context} tokens), not {stride}")
    found: list[tuple[int, int, int]] = []
    predicted = 1  # tokens before this one are predicted already (a text's first token has nothing before it)
    for begin in range(0, length, stride):
        end = min(begin + context, length)
        first = max(predicted, begin + 1)  # a window's first token has nothing before it either
        if end > first:
            found.append((begin, end, first))
            predicted = end
        if end == length:
            break
    return found


def sequence_nll(decoder: Decoder, ids: Sequence[int], context: int, stride: int) -> tuple[float, int]:
    """(summed negative log-likelihood, tokens predicted) of one token sequence under the engine's `decoder`."""
    tokens = torch.tensor(list(ids), dtype=torch.int64)
    cache = KVCache(decoder.config, 1, min(context, len(ids)))
    total, count = 0.0, 0
    for begin, end, first in windows(len(ids), context, stride):
        rows = torch.arange(first - 1 - begin, end - 1 - begin)  # window positions whose logits predict [first, end)
        logits = decoder.forward(tokens[begin:end], [Segment(0, 0, end - begin)], cache, logits_rows=rows)
        log_probs = torch.log_softmax(logits.double(), dim=-1)
        targets = tokens[first:end]
        total -= float(log_probs.gather(1, targets[:, None]).sum())
        count += len(targets)
    return total, count


def model_dir_perplexity(
    model_dir: Path,
    texts: Sequence[str] | None = None,
    *,
    context: int | None = None,
    stride: int | None = None,
    data: str | None = None,
    manifest: Manifest | None = None,
) -> Perplexity:
    """The perplexity of the text-generation model directory on `texts` (default: the built-in held-out paragraphs)
    in windows of `context` tokens (default: the model's context, at most MAX_DEFAULT_CONTEXT) every `stride` tokens
    (default: half a window). `manifest`: the directory's, already verified (else it is read and verified here)."""
    manifest = manifest or load_verified(model_dir)  # a tampered or incomplete directory: ManifestError, one line
    return model_perplexity(load_cpu_model(model_dir, manifest), texts, context=context, stride=stride, data=data)


def load_cpu_model(model_dir: Path, manifest: Manifest) -> GenerationModel:
    """The text-generation directory loaded as the CPU server loads it (FP32 or INT8 linear layers, as its variant
    says); one line when it holds another task's model or a decoder compiled for NeuronCores."""
    if manifest.generation is None:
        raise SageboxError(f"{model_dir} holds a {manifest.task} model: perplexity is measured on text-generation ones")
    if manifest.runtime != "torch":
        raise SageboxError(
            f"{model_dir} holds a decoder compiled for NeuronCores, whose graphs give the last prompt token's logits "
            "only: measure perplexity on the FP32 text-generation directory it was compiled from"
        )
    return load_generation_model(model_dir, manifest)


def model_perplexity(
    model: GenerationModel,
    texts: Sequence[str] | None = None,
    *,
    context: int | None = None,
    stride: int | None = None,
    data: str | None = None,
) -> Perplexity:
    """model_dir_perplexity of a model already loaded (load_cpu_model)."""
    spec = model.manifest.generation
    assert spec is not None and isinstance(model.decoder, Decoder)
    if texts is None:
        texts = builtin.heldout_texts()
        data = data or f"Sagebox's built-in held-out text ({len(texts)} paragraphs)"
    window = context or min(spec.context_length, MAX_DEFAULT_CONTEXT)
    if not 2 <= window <= spec.context_length:
        raise SageboxError(f"the perplexity window must be 2 to {spec.context_length} tokens (the context): {window}")
    step = stride or max(window // 2, 1)
    total, count = 0.0, 0
    for text in texts:
        ids = model.encode(text, spec.add_special_tokens)
        if len(ids) > 1:
            nll, predicted = sequence_nll(model.decoder, ids, window, step)
            total, count = total + nll, count + predicted
    if count == 0:
        raise SageboxError(f"no text of {data or 'the data'} is two tokens long: there is nothing to predict")
    mean = total / count
    return Perplexity(math.exp(mean), mean, count, len(texts), window, step, data or f"{len(texts)} texts")


def evaluate_perplexity(model_dir: Path, texts: Sequence[str] | None = None, data: str | None = None) -> TaskEvaluation:
    """`sagebox evaluate` of a text-generation model: its perplexity as the task's metric (the record in `outputs`)."""
    start = time.perf_counter()
    manifest = load_verified(model_dir)
    result = model_dir_perplexity(model_dir, texts, data=data, manifest=manifest)
    return TaskEvaluation(
        str(model_dir),
        manifest.variant,
        manifest.runtime,
        {"perplexity": result.perplexity},
        time.perf_counter() - start,
        result.texts,
        result,
    )
