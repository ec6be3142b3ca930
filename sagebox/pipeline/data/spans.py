"""Entity spans, and BIO tag sequences read as spans the way seqeval's default mode chunks them: the shape both an
annotated data file (data/task_data.py) and a token-classification model's predictions (gate/task_metrics.py) are
compared in."""

from __future__ import annotations

from collections.abc import Sequence

Span = tuple[int, int, str]  # (start, end exclusive, type): characters, or tokens from bio_spans


def _split_tag(tag: str) -> tuple[str, str]:
    """(prefix, type) as seqeval reads a tag ("O" has type "_", a prefix without a type too); a bare label without a
    B-/I-/E-/S- prefix is read as I-<label> (seqeval would misread its first letter as the prefix)."""
    if tag == "O":
        return "O", "_"
    if tag in ("B", "I", "E", "S"):
        return tag, "_"
    if len(tag) >= 2 and tag[0] in "BIES" and tag[1] == "-":
        return tag[0], tag[2:] or "_"
    return "I", tag


def _ends_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """seqeval's end_of_chunk (default mode)."""
    return (
        prev_tag in ("E", "S")
        or (prev_tag in ("B", "I") and tag in ("B", "S", "O"))
        or (prev_tag != "O" and prev_type != type_)
    )


def _starts_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """seqeval's start_of_chunk (default mode)."""
    return (
        tag in ("B", "S") or (prev_tag in ("E", "S", "O") and tag in ("E", "I")) or (tag != "O" and prev_type != type_)
    )


def bio_spans(tags: Sequence[str]) -> list[Span]:
    """Entity chunks of one tag sequence as (start, end exclusive, type) token indices, chunked as seqeval's default
    (non-strict) mode does: an I- after O or after another type starts a chunk, B-X I-X is one chunk, and E-/S- (IOBES)
    close chunks. seqeval's own ends are inclusive; these are exclusive, like character spans."""
    spans: list[Span] = []
    prev_tag, prev_type, begin = "O", "", 0  # seqeval's start state
    for index, label in enumerate([*tags, "O"]):
        tag, type_ = _split_tag(label)
        if _ends_chunk(prev_tag, tag, prev_type, type_):
            spans.append((begin, index, prev_type))
        if _starts_chunk(prev_tag, tag, prev_type, type_):
            begin = index
        prev_tag, prev_type = tag, type_
    return spans
