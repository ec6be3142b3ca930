"""Evaluation and calibration data for the encoder tasks beyond extractive QA: labelled texts (classification),
entity-annotated texts (token classification), query/passage pairs (retrieval) and plain texts (calibration).

Users bring these files from wherever their data lives, so the loaders accept the common shapes (JSON Lines with the
usual field names of Hugging Face datasets, CSV with a header, plain text) and refuse anything else with one line
naming the file and line, which the CLI prints as its error. Loaders return frozen dataclasses of tuples: the data is
read once and shared by evaluation and calibration without copies going out of step.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError
from sagebox.pipeline.data.spans import Span, bio_spans

JSONL_SUFFIXES = (".jsonl", ".json")
CSV_SUFFIXES = (".csv",)
TEXT_SUFFIXES = (".txt",)
MULTI_LABEL_SEPARATOR = "|"  # between a CSV cell's labels
# (text, pair) field names: ours first, then GLUE/NLI datasets' (MNLI/SNLI, MRPC/STS-B, QNLI).
PAIR_FIELDS = (("text", "text_pair"), ("premise", "hypothesis"), ("sentence1", "sentence2"), ("question", "sentence"))
SINGLE_TEXT_FIELDS = ("text", "sentence")  # SST-2 and CoLA name their one text `sentence`
ENTITY_LABEL_FIELDS = ("label", "type", "entity_group")
# Calibration text from objects: the first group whose fields are all strings, joined with a space.
CALIBRATION_FIELDS = (
    ("text", "text_pair"),
    ("question", "context"),
    *PAIR_FIELDS[1:],
    ("text",),
    ("query",),
    ("passage",),
    ("question",),
    ("sentence",),
    ("premise",),
    ("sentence1",),
    ("context",),
)


# --- data types ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClassificationExample:
    text: str
    text_pair: str | None
    labels: tuple[str, ...]  # one label, or a multi-label example's set (possibly empty)
    line: int = field(default=0, compare=False)  # where it came from, for error messages


@dataclass(frozen=True)
class ClassificationData:
    examples: tuple[ClassificationExample, ...]
    multi_label: bool
    source: str = field(default="", compare=False)

    @property
    def label_set(self) -> tuple[str, ...]:
        """Every label the data holds, sorted."""
        return tuple(sorted({label for example in self.examples for label in example.labels}))

    def named(self, id2label: Mapping[int, str]) -> ClassificationData:
        """The same data with the model's label names: a label that is a name stays, an integer that is an id
        becomes its name (names win where a name is itself a number); any other label is refused."""
        names = {str(name) for name in id2label.values()}
        ids = {int(key): str(name) for key, name in id2label.items()}
        examples = tuple(
            replace(example, labels=tuple(self._name(label, names, ids, example.line) for label in example.labels))
            for example in self.examples
        )
        return replace(self, examples=examples)

    def _name(self, label: str, names: set[str], ids: Mapping[int, str], line: int) -> str:
        if label in names:
            return label
        if _is_int_text(label) and int(label) in ids:
            return ids[int(label)]
        allowed = ", ".join(sorted(names)[:6]) + (", ..." if len(names) > 6 else "")
        raise _error(self.source, line, f"label {_show(label)} is not one of the model's labels ({allowed})")


@dataclass(frozen=True)
class EntityExample:
    text: str
    spans: tuple[Span, ...]  # character (start, end exclusive, type), sorted
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class EntityData:
    examples: tuple[EntityExample, ...]
    source: str = field(default="", compare=False)

    @property
    def types(self) -> tuple[str, ...]:
        """Every entity type the data holds, sorted."""
        return tuple(sorted({span[2] for example in self.examples for span in example.spans}))


@dataclass(frozen=True)
class RetrievalData:
    queries: tuple[str, ...]
    passages: tuple[str, ...]
    relevant: tuple[frozenset[int], ...]  # per query: indices into passages


# --- errors and values ----------------------------------------------------------------------------------------------


def _error(path: str | Path, line: int, message: str) -> SageboxError:
    """One line: `file:line: message` (or `file: message`), the form editors and terminals link to; data built in
    memory (no file) gives the message alone."""
    where = f"{path}:{line}: " if path and line else f"{path}: " if path else ""
    return SageboxError(f"{where}{message}".replace("\r", " ").replace("\n", " "))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int_text(value: str) -> bool:
    return value.strip().lstrip("+-").isdigit()


def _is_json_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _string(record: Mapping[str, Any], key: str, path: Path, line: int) -> str:
    """A non-empty string field."""
    value = record.get(key)
    if not isinstance(value, str):
        raise _error(path, line, f"{key!r} must be a string, not {_json_type(value)}")
    if not value.strip():
        raise _error(path, line, f"{key!r} is empty")
    return value


# --- file formats ---------------------------------------------------------------------------------------------------


def _checked_file(path: str | Path, what: str, suffixes: Sequence[str]) -> Path:
    path = Path(path)
    if not path.is_file():
        raise _error(path, 0, f"no such {what} file")
    if path.suffix.lower() not in suffixes:
        raise _error(path, 0, f"{what} files must end in {', '.join(suffixes)}")
    return path


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a UTF-8 file (a byte-order mark is allowed)."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            yield from enumerate(handle, start=1)
    except UnicodeDecodeError as exc:
        raise _error(path, 0, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON Lines file."""
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise _error(
                path, number, f"not valid JSON ({exc.msg} at column {exc.colno}); expected one JSON value per line"
            ) from None


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, value in _json_lines(path):
        if not isinstance(value, dict):
            raise _error(path, number, f"expected a JSON object, not {_json_type(value)}")
        yield number, value


def _csv_rows(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of each non-blank row of a CSV file whose header names each of `required` (alternatives "a|b");
    every row has every header column."""
    line = 0
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            header = [name.strip() for name in reader.fieldnames or []]
            _check_header(path, header, required)
            reader.fieldnames = header
            for row in reader:
                if None in row:
                    raise _error(path, reader.line_num, f"more cells than the {len(header)} header columns")
                cells = list(row.values())
                if all(not cell or not cell.strip() for cell in cells):
                    continue  # a blank line
                if any(cell is None for cell in cells):
                    raise _error(path, reader.line_num, f"fewer cells than the {len(header)} header columns")
                line = reader.line_num
                yield line, row
    except csv.Error as exc:
        raise _error(path, line + 1, f"not valid CSV ({exc})") from None
    except UnicodeDecodeError as exc:
        raise _error(path, 0, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _check_header(path: Path, header: Sequence[str], required: Sequence[str]) -> None:
    if not header:
        raise _error(path, 0, "holds no CSV header row")
    for names in required:
        if not set(names.split("|")) & set(header):
            wanted = " or ".join(repr(name) for name in names.split("|"))
            raise _error(path, 1, f"the CSV header ({', '.join(header)}) has no {wanted} column")


# --- classification -------------------------------------------------------------------------------------------------


def load_classification(path: str | Path) -> ClassificationData:
    """Labelled texts (optionally text pairs) from JSON Lines or CSV.

    JSON Lines: {"text": ..., "label": ...} with an optional "text_pair" (or NLI-style premise/hypothesis,
    sentence1/sentence2, question/sentence); the label a string, an integer (kept as its string form until `named`)
    or a list for multi-label data (key "label" or "labels"). CSV: a header with text (and text_pair) and label (or
    labels) columns; a cell's labels separated by "|" make the file multi-label, as does a "labels" column."""
    path = _checked_file(path, "classification data", JSONL_SUFFIXES + CSV_SUFFIXES)
    data = _classification_csv(path) if path.suffix.lower() in CSV_SUFFIXES else _classification_jsonl(path)
    if not data.examples:
        raise _error(path, 0, "holds no examples")
    return data


def _texts(record: Mapping[str, Any], path: Path, line: int) -> tuple[str, str | None]:
    """(text, pair) by the first field names present: a pair's second text is required once its first is there."""
    for first, second in PAIR_FIELDS:
        if first in record and (first == "text" or second in record):
            text = _string(record, first, path, line)
            if first == "text" and record.get(second) is None:  # text_pair is optional; the NLI pairs are not
                return text, None
            return text, _string(record, second, path, line)
    for name in SINGLE_TEXT_FIELDS:
        if name in record:
            return _string(record, name, path, line), None
    for first, second in PAIR_FIELDS[1:]:
        if first in record:
            raise _error(path, line, f"{first!r} needs its pair {second!r}")
    raise _error(path, line, "has no 'text' field (nor premise/hypothesis, sentence1/sentence2, question/sentence)")


def _label_value(record: Mapping[str, Any], path: Path, line: int) -> tuple[str, Any]:
    present = [key for key in ("label", "labels") if key in record]
    if not present:
        raise _error(path, line, "has no 'label' field")
    if len(present) > 1:
        raise _error(path, line, "has both 'label' and 'labels': keep one")
    return present[0], record[present[0]]


def _one_label(value: object, key: str, path: Path, line: int) -> str:
    if _is_json_int(value):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise _error(path, line, f"{key!r} must be a non-empty string or an integer, not {_show(value)}")


def _classification_jsonl(path: Path) -> ClassificationData:
    examples: list[ClassificationExample] = []
    first_kind: tuple[int, bool] | None = None  # (line, is a list) of the first example
    for line, record in _json_objects(path):
        text, pair = _texts(record, path, line)
        key, value = _label_value(record, path, line)
        is_list = isinstance(value, list)
        if first_kind is None:
            first_kind = (line, is_list)
        elif first_kind[1] != is_list:
            kinds = ("a list of labels", "a single label")
            raise _error(
                path,
                line,
                f"{key!r} is {kinds[not is_list]} but line {first_kind[0]} has {kinds[is_list]}: "
                "write every label as a list in multi-label data",
            )
        labels = (
            [_one_label(item, key, path, line) for item in value] if is_list else [_one_label(value, key, path, line)]
        )
        examples.append(ClassificationExample(text, pair, tuple(dict.fromkeys(labels)), line))
    return ClassificationData(tuple(examples), bool(first_kind and first_kind[1]), str(path))


def _classification_csv(path: Path) -> ClassificationData:
    raw: list[tuple[int, str, str | None, str]] = []
    label_column = "label"
    for line, row in _csv_rows(path, ("text", "label|labels")):
        label_column = "label" if "label" in row else "labels"
        text = _string(row, "text", path, line)
        pair = row.get("text_pair") or None
        raw.append((line, text, pair if pair and pair.strip() else None, row[label_column]))
    multi_label = label_column == "labels" or any(MULTI_LABEL_SEPARATOR in cell for *_, cell in raw)
    examples = []
    for line, text, pair, cell in raw:
        labels = [label.strip() for label in cell.split(MULTI_LABEL_SEPARATOR)] if multi_label else [cell.strip()]
        labels = [label for label in labels if label]
        if not multi_label and not labels:
            raise _error(path, line, f"the {label_column!r} cell is empty")
        examples.append(ClassificationExample(text, pair, tuple(dict.fromkeys(labels)), line))
    return ClassificationData(tuple(examples), multi_label, str(path))


# --- entities -------------------------------------------------------------------------------------------------------


def load_entities(
    path: str | Path, *, label_names: Sequence[str] | None = None, id2label: Mapping[int, str] | None = None
) -> EntityData:
    """Entity-annotated texts from JSON Lines, with character spans.

    Each line is either {"text": ..., "entities": [{"start", "end", "label"}]} ("type" or "entity_group" for the
    label) or CoNLL-style {"tokens": [...], "tags": [...]} ("ner_tags" too) with BIO tags, whose text is the tokens
    joined by single spaces. Integer tags are names by position in `label_names`, or by `id2label`."""
    path = _checked_file(path, "entity data", JSONL_SUFFIXES)
    names = _tag_names(label_names, id2label)
    examples = []
    for line, record in _json_objects(path):
        if "text" in record:
            examples.append(_annotated_example(record, path, line))
        elif "tokens" in record:
            examples.append(_conll_example(record, names, path, line))
        else:
            raise _error(path, line, "has neither 'text' with 'entities' nor 'tokens' with 'tags'")
    if not examples:
        raise _error(path, 0, "holds no examples")
    return EntityData(tuple(examples), str(path))


def _tag_names(label_names: Sequence[str] | None, id2label: Mapping[int, str] | None) -> Mapping[int, str] | None:
    """Tag names by id; an empty list or mapping counts as none given (a model config without labels)."""
    if label_names:
        return dict(enumerate(label_names))
    if id2label:
        return {int(key): str(name) for key, name in id2label.items()}
    return None


def _annotated_example(record: Mapping[str, Any], path: Path, line: int) -> EntityExample:
    text = _string(record, "text", path, line)
    entities = record.get("entities")
    if not isinstance(entities, list):
        raise _error(path, line, f"'entities' must be a list, not {_json_type(entities)}")
    spans: set[Span] = set()
    for index, entity in enumerate(entities):
        where = f"entities[{index}]"
        if not isinstance(entity, dict):
            raise _error(path, line, f"{where} must be an object, not {_json_type(entity)}")
        start, end = entity.get("start"), entity.get("end")
        if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) or isinstance(end, bool):
            raise _error(path, line, f"{where} needs integer 'start' and 'end'")
        if not 0 <= start < end <= len(text):
            raise _error(
                path, line, f"{where} span {start}..{end} is empty or outside the text ({len(text)} characters)"
            )
        label_key = next((key for key in ENTITY_LABEL_FIELDS if key in entity), None)
        if label_key is None:
            raise _error(path, line, f"{where} has no 'label' (nor 'type', 'entity_group')")
        label = entity[label_key]
        if not isinstance(label, str) or not label.strip():
            raise _error(path, line, f"{where}.{label_key} must be a non-empty string, not {_show(label)}")
        spans.add((start, end, label.strip()))
    return EntityExample(text, tuple(sorted(spans)), line)


def _conll_example(record: Mapping[str, Any], names: Mapping[int, str] | None, path: Path, line: int) -> EntityExample:
    tokens = record["tokens"]
    if not isinstance(tokens, list) or not tokens:
        raise _error(path, line, "'tokens' must be a non-empty list of strings")
    for index, token in enumerate(tokens):
        if not isinstance(token, str) or not token.strip() or token != token.strip():
            raise _error(path, line, f"tokens[{index}] must be a non-empty string without surrounding spaces")
    tag_key = next((key for key in ("tags", "ner_tags") if key in record), None)
    if tag_key is None:
        raise _error(path, line, "has 'tokens' but no 'tags' (nor 'ner_tags')")
    raw_tags = record[tag_key]
    if not isinstance(raw_tags, list) or len(raw_tags) != len(tokens):
        count = len(raw_tags) if isinstance(raw_tags, list) else _json_type(raw_tags)
        raise _error(path, line, f"{tag_key!r} must be a list of one tag per token ({len(tokens)} tokens, {count})")
    tags = [_tag(tag, names, tag_key, path, line) for tag in raw_tags]
    starts = []
    position = 0
    for token in tokens:
        starts.append(position)
        position += len(token) + 1
    spans = tuple(
        (starts[first], starts[last - 1] + len(tokens[last - 1]), kind) for first, last, kind in bio_spans(tags)
    )
    return EntityExample(" ".join(tokens), tuple(sorted(set(spans))), line)


def _tag(tag: object, names: Mapping[int, str] | None, key: str, path: Path, line: int) -> str:
    if isinstance(tag, str) and tag.strip():
        return tag.strip()
    if isinstance(tag, int) and not isinstance(tag, bool):
        if names is None:
            raise _error(path, line, f"{key!r} are ids: give the tag names (label_names or the model's id2label)")
        if tag not in names:
            raise _error(path, line, f"tag id {tag} is not one of the {len(names)} tag names")
        return names[tag]
    raise _error(path, line, f"{key!r} must hold strings or integers, not {_show(tag)}")


# --- retrieval ------------------------------------------------------------------------------------------------------


def load_retrieval(path: str | Path) -> RetrievalData:
    """Queries with their relevant passages from JSON Lines: {"query": ..., "positive": ...} ("passage" for the
    positive, "positives" for several; optional "negative"/"negatives" add distractors), and distractor lines
    {"passage": ...} without a query. Passages are deduplicated in order of first appearance; a query on several
    lines is one query whose relevant passages are all of theirs."""
    path = _checked_file(path, "retrieval data", JSONL_SUFFIXES)
    passages: dict[str, int] = {}
    relevant: dict[str, set[int]] = {}
    for line, record in _json_objects(path):
        if "query" not in record:
            if "passage" not in record:
                raise _error(path, line, "has neither 'query' nor 'passage'")
            passages.setdefault(_string(record, "passage", path, line), len(passages))
            continue
        query = _string(record, "query", path, line)
        positives = _passage_list(record, ("positive", "positives", "passage"), path, line)
        if not positives:
            raise _error(path, line, "a query needs a 'positive' passage (or 'positives')")
        negatives = _passage_list(record, ("negative", "negatives"), path, line)
        indices = relevant.setdefault(query, set())
        for passage in positives:
            indices.add(passages.setdefault(passage, len(passages)))
        for passage in negatives:
            passages.setdefault(passage, len(passages))
    if not relevant:
        raise _error(path, 0, "holds no queries")
    return RetrievalData(tuple(relevant), tuple(passages), tuple(frozenset(indices) for indices in relevant.values()))


def _passage_list(record: Mapping[str, Any], keys: Sequence[str], path: Path, line: int) -> list[str]:
    """The passages under any of `keys`, each a string or a list of strings."""
    found: list[str] = []
    for key in keys:
        if key not in record:
            continue
        value = record[key]
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                where = f"{key}[{index}]" if isinstance(value, list) else key
                raise _error(path, line, f"{where!r} must be a non-empty string, not {_show(item)}")
            found.append(item)
    return found


# --- calibration texts ----------------------------------------------------------------------------------------------


def load_texts(path: str | Path, limit: int | None = None) -> tuple[str, ...]:
    """Calibration texts (at most `limit`): a .txt file's non-empty lines; JSON Lines of strings or of objects (the
    first of text(+text_pair), question+context, the NLI pairs, then text, query, passage, question, sentence, ...,
    pairs joined with a space; "tokens" lists joined too); or a CSV's text column (with text_pair when present)."""
    path = _checked_file(path, "text", TEXT_SUFFIXES + JSONL_SUFFIXES + CSV_SUFFIXES)
    if limit is not None and limit < 1:
        raise SageboxError(f"the text limit must be at least 1, not {limit}")
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        source = _txt_texts(path)
    elif suffix in CSV_SUFFIXES:
        source = _csv_texts(path)
    else:
        source = _jsonl_texts(path)
    texts: list[str] = []
    for text in source:
        if text.strip():
            texts.append(text.strip())
            if limit is not None and len(texts) >= limit:
                break
    if not texts:
        raise _error(path, 0, "holds no texts")
    return tuple(texts)


def _txt_texts(path: Path) -> Iterator[str]:
    for _, line in _lines(path):
        yield line


def _csv_texts(path: Path) -> Iterator[str]:
    for _, row in _csv_rows(path, ("text",)):
        yield " ".join(row[name].strip() for name in ("text", "text_pair") if row.get(name, "").strip())


def _jsonl_texts(path: Path) -> Iterator[str]:
    for line, value in _json_lines(path):
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            yield _record_text(value, path, line)
        else:
            raise _error(path, line, f"expected a string or an object, not {_json_type(value)}")


def _record_text(record: Mapping[str, Any], path: Path, line: int) -> str:
    for group in CALIBRATION_FIELDS:
        if all(isinstance(record.get(name), str) for name in group):
            return " ".join(record[name] for name in group)
    tokens = record.get("tokens")
    if isinstance(tokens, list) and tokens and all(isinstance(token, str) for token in tokens):
        return " ".join(tokens)
    raise _error(path, line, "has no text field (text, query, passage, question, sentence, context or tokens)")
