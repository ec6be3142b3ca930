"""Token scores into entities, the way transformers' TokenClassificationPipeline groups them, so a client sees the
same answer from an endpoint as from the pipeline on its own machine.

Per window: every token the tokenizer did not add becomes a "pre-entity" (its token, character span, label
probabilities, and whether it continues the word before it); strategies `first`, `average` and `max` first merge a
word's pieces into one word (taking the first piece's label, the mean probabilities, or the most confident piece's
label); `simple` and the word strategies then group adjacent words of the same entity type (B-/I- prefixes: a B-
starts a new entity) into spans with the mean score. Entities of several windows are merged where they overlap:
the longer one wins, then the higher score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from container.tasks.base import Window

STRATEGIES = ("none", "simple", "first", "average", "max")
WORD_STRATEGIES = ("first", "average", "max")


@dataclass(frozen=True)
class PreEntity:
    word: str
    scores: np.ndarray  # float32 [labels]
    start: int
    end: int
    index: int
    is_subword: bool


class Grouper:
    """What grouping needs of the tokenizer: how it marks word pieces, its unknown token, and its decoder."""

    def __init__(self, tokenizer: Tokenizer, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        model = tokenizer.model
        # A word-aware tokenizer marks continuation pieces with a prefix ("##"): a piece longer than its text
        # continues a word. Others (byte-level BPE) fall back to "no space before it" (the pipeline's heuristic).
        self._word_aware = bool(getattr(model, "continuing_subword_prefix", None))
        self._unk_id = _unk_id(tokenizer)
        self._decoder = tokenizer.decoder

    def tokens_to_string(self, tokens: Sequence[str]) -> str:
        return self._decoder.decode(list(tokens)) if self._decoder is not None else " ".join(tokens)

    def pre_entities(self, text: str, window: Window, probabilities: np.ndarray) -> list[PreEntity]:
        out: list[PreEntity] = []
        for index in range(window.length):
            if window.special[index]:
                continue
            word = window.tokens[index]
            start, end = window.offsets[index]
            reference = text[start:end]
            if self._word_aware:
                is_subword = len(word) != len(reference)
            else:
                is_subword = start > 0 and " " not in text[start - 1 : start + 1]
            if window.ids[index] == self._unk_id:
                word, is_subword = reference, False
            out.append(PreEntity(word, probabilities[index], start, end, index, is_subword))
        return out

    def aggregate(self, pre: Sequence[PreEntity], strategy: str) -> list[dict[str, Any]]:
        if strategy in ("none", "simple"):
            entities = []
            for p in pre:
                best = int(p.scores.argmax())
                entities.append(
                    {
                        "entity": self.labels[best],
                        "score": p.scores[best],
                        "index": p.index,
                        "word": p.word,
                        "start": p.start,
                        "end": p.end,
                    }
                )
        else:
            entities = self._words(pre, strategy)
        if strategy == "none":
            return entities
        return self._group(entities)

    def _words(self, pre: Sequence[PreEntity], strategy: str) -> list[dict[str, Any]]:
        words: list[dict[str, Any]] = []
        group: list[PreEntity] = []
        for p in pre:
            if group and not p.is_subword:
                words.append(self._word(group, strategy))
                group = []
            group.append(p)
        if group:
            words.append(self._word(group, strategy))
        return words

    def _word(self, pieces: Sequence[PreEntity], strategy: str) -> dict[str, Any]:
        if strategy == "first":
            scores = pieces[0].scores
            best = int(scores.argmax())
            score = scores[best]
        elif strategy == "max":
            scores = max(pieces, key=lambda p: p.scores.max()).scores
            best = int(scores.argmax())
            score = scores[best]
        else:  # average
            mean = np.nanmean(np.stack([p.scores for p in pieces]), axis=0)
            best = int(mean.argmax())
            score = mean[best]
        return {
            "entity": self.labels[best],
            "score": score,
            "word": self.tokens_to_string([p.word for p in pieces]),
            "start": pieces[0].start,
            "end": pieces[-1].end,
        }

    def _group(self, entities: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = []
        run: list[dict[str, Any]] = []
        for entity in entities:
            if run:
                bi, tag = _tag(entity["entity"])
                _, last_tag = _tag(run[-1]["entity"])
                if not (tag == last_tag and bi != "B"):
                    groups.append(self._span(run))
                    run = []
            run.append(entity)
        if run:
            groups.append(self._span(run))
        return groups

    def _span(self, run: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return {
            "entity_group": run[0]["entity"].split("-", 1)[-1],
            "score": np.mean(np.nanmean([e["score"] for e in run])),
            "word": self.tokens_to_string([e["word"] for e in run]),
            "start": run[0]["start"],
            "end": run[-1]["end"],
        }


def merge_overlapping(entities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entities of overlapping windows: where two overlap, the longer (then the higher-scoring) one stays."""
    if not entities:
        return entities
    ordered = sorted(entities, key=lambda e: e["start"])
    merged: list[dict[str, Any]] = []
    previous = ordered[0]
    for entity in ordered:
        if previous["start"] <= entity["start"] < previous["end"]:
            length, previous_length = entity["end"] - entity["start"], previous["end"] - previous["start"]
            if length > previous_length or (length == previous_length and entity["score"] > previous["score"]):
                previous = entity
        else:
            merged.append(previous)
            previous = entity
    merged.append(previous)
    return merged


def _tag(label: str) -> tuple[str, str]:
    """("B" or "I", entity type); a label without a B-/I- prefix continues as I- (the pipeline's rule)."""
    if label.startswith("B-"):
        return "B", label[2:]
    if label.startswith("I-"):
        return "I", label[2:]
    return "I", label


def _unk_id(tokenizer: Tokenizer) -> int | None:
    token = getattr(tokenizer.model, "unk_token", None)
    for candidate in (token, "[UNK]", "<unk>"):
        if candidate:
            found = tokenizer.token_to_id(candidate)
            if found is not None:
                return int(found)
    return None
