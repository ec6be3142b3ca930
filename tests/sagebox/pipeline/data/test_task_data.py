"""Task data loaders: the accepted shapes give exactly the expected examples, and every refusal is one line naming
the file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.pipeline.data.task_data import (
    ClassificationData,
    ClassificationExample,
    EntityExample,
    RetrievalData,
    load_classification,
    load_entities,
    load_retrieval,
    load_texts,
)

NER = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
SENTIMENT = {0: "negative", 1: "neutral", 2: "positive"}


def jsonl(path: Path, *records: object) -> Path:
    """Write records one per line; a str record is written as the raw line (for malformed-input tests)."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def refused(call: object, match: str) -> str:
    """The SageboxError message of `call()`, checked to be one line matching `match`."""
    assert callable(call)
    with pytest.raises(SageboxError, match=match) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- classification -------------------------------------------------------------------------------------------------


def test_classification_jsonl_with_every_text_field_name(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "data.jsonl",
        {"text": "great film", "label": "positive"},
        {"text": "dull", "text_pair": "and long", "label": 0},
        "",
        {"text": "fine", "text_pair": None, "label": " neutral "},
        {"premise": "A man sleeps.", "hypothesis": "A man is awake.", "label": "contradiction"},
        {"sentence1": "He left.", "sentence2": "He went away.", "label": 1},
        {"question": "Who left?", "sentence": "He left.", "label": "entailment"},
        {"sentence": "Lovely.", "label": 2},
    )
    data = load_classification(path)
    assert data == ClassificationData(
        (
            ClassificationExample("great film", None, ("positive",)),
            ClassificationExample("dull", "and long", ("0",)),
            ClassificationExample("fine", None, ("neutral",)),
            ClassificationExample("A man sleeps.", "A man is awake.", ("contradiction",)),
            ClassificationExample("He left.", "He went away.", ("1",)),
            ClassificationExample("Who left?", "He left.", ("entailment",)),
            ClassificationExample("Lovely.", None, ("2",)),
        ),
        multi_label=False,
    )
    assert [example.line for example in data.examples] == [1, 2, 4, 5, 6, 7, 8]  # the blank line 3 is skipped
    assert data.label_set == ("0", "1", "2", "contradiction", "entailment", "neutral", "positive")


def test_multi_label_jsonl_keeps_empty_sets_and_drops_repeats(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "topics.json",
        {"text": "match report", "labels": ["sports", "sports", "health"]},
        {"text": "weather", "labels": []},
        {"text": "budget", "label": [1]},
    )
    data = load_classification(path)
    assert data.multi_label
    assert [example.labels for example in data.examples] == [("sports", "health"), (), ("1",)]


def test_named_maps_ids_keeps_names_and_refuses_others(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "d.jsonl",
        {"text": "a", "label": 2},
        {"text": "b", "label": "negative"},
        {"text": "c", "label": "happy"},
    )
    data = load_classification(path)
    head = ClassificationData(data.examples[:2], data.multi_label, data.source)
    assert [example.labels for example in head.named(SENTIMENT).examples] == [("positive",), ("negative",)]
    message = refused(lambda: data.named(SENTIMENT), "is not one of the model's labels")
    assert message == f"{path}:3: label 'happy' is not one of the model's labels (negative, neutral, positive)"
    # Names win over ids where a name is itself a number (star ratings): "1" stays "1", 0 becomes "1".
    stars = ClassificationData(
        (ClassificationExample("x", None, ("1",)), ClassificationExample("y", None, ("0",))), False
    )
    assert [e.labels for e in stars.named({0: "1", 1: "2"}).examples] == [("1",), ("1",)]
    assert refused(lambda: stars.named({0: "a"}), "label") == "label '1' is not one of the model's labels (a)"
    many = {i: f"label_{i}" for i in range(10)}
    assert "(label_0, label_1, label_2, label_3, label_4, label_5, ...)" in refused(
        lambda: data.named(many), "label 'negative'"
    )


def test_classification_csv_single_pair_and_multi_label(tmp_path: Path) -> None:
    single = tmp_path / "single.csv"
    single.write_text('text,label\n"Good, really good",positive\n\nbad,0\n', encoding="utf-8")
    data = load_classification(single)
    assert not data.multi_label
    assert [(e.text, e.labels, e.line) for e in data.examples] == [
        ("Good, really good", ("positive",), 2),
        ("bad", ("0",), 4),
    ]
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("text,text_pair,label\nA man sleeps.,A man is awake.,contradiction\nalone,,neutral\n")
    assert [(e.text_pair, e.labels) for e in load_classification(pairs).examples] == [
        ("A man is awake.", ("contradiction",)),
        (None, ("neutral",)),
    ]
    multi = tmp_path / "multi.csv"
    multi.write_text("text,label\nfootball and flu,sports|health\nrugby,sports\nnothing,\n")
    data = load_classification(multi)
    assert data.multi_label  # one cell with "|" makes the file multi-label
    assert [e.labels for e in data.examples] == [("sports", "health"), ("sports",), ()]
    column = tmp_path / "column.csv"
    column.write_text("labels,text\nsports,rugby\n")
    assert load_classification(column).multi_label


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"text": "a", "label": 1}', '{"text": "b", "label": '], r":2: not valid JSON \(Expecting value at column"),
        (['["text", "a"]'], r":1: expected a JSON object, not a list"),
        (['{"label": 1}'], r":1: has no 'text' field"),
        (['{"text": "a"}'], r":1: has no 'label' field"),
        (['{"text": "", "label": 1}'], r":1: 'text' is empty"),
        (['{"text": 5, "label": 1}'], r":1: 'text' must be a string, not a number"),
        (['{"text": "a", "label": 1.5}'], r":1: 'label' must be a non-empty string or an integer, not 1.5"),
        (['{"text": "a", "label": true}'], r":1: 'label' must be a non-empty string or an integer, not True"),
        (['{"text": "a", "labels": ["x", null]}'], r":1: 'labels' must be a non-empty string or an integer, not None"),
        (['{"text": "a", "label": "x", "labels": ["y"]}'], r":1: has both 'label' and 'labels'"),
        (['{"premise": "a", "label": 1}'], r":1: 'premise' needs its pair 'hypothesis'"),
        (['{"premise": "a", "hypothesis": null, "label": 1}'], r":1: 'hypothesis' must be a string, not null"),
        (
            ['{"text": "a", "labels": ["x"]}', '{"text": "b", "labels": "y"}'],
            r":2: 'labels' is a single label but line 1 has a list of labels: write every label as a list",
        ),
    ],
)
def test_classification_jsonl_refusals(tmp_path: Path, lines: list[str], message: str) -> None:
    path = jsonl(tmp_path / "bad.jsonl", *lines)
    assert refused(lambda: load_classification(path), message).startswith(f"{path}:")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r": holds no CSV header row"),
        ("text,label\n", r": holds no examples"),
        ("sentence,label\na,1\n", r":1: the CSV header \(sentence, label\) has no 'text' column"),
        ("text\na\n", r":1: the CSV header \(text\) has no 'label' or 'labels' column"),
        ("text,label\na,1,extra\n", r":2: more cells than the 2 header columns"),
        ("text,text_pair,label\na,b\n", r":2: fewer cells than the 3 header columns"),
        ("text,label\na,1\nb,\n", r":3: the 'label' cell is empty"),
        ("text,label\n,1\n", r":2: 'text' is empty"),
    ],
)
def test_classification_csv_refusals(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    refused(lambda: load_classification(path), message)


def test_missing_wrong_kind_empty_and_binary_files_are_refused(tmp_path: Path) -> None:
    assert refused(lambda: load_classification(tmp_path / "none.jsonl"), "no such") == (
        f"{tmp_path / 'none.jsonl'}: no such classification data file"
    )
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    refused(lambda: load_classification(tmp_path / "data.parquet"), r"must end in \.jsonl, \.json, \.csv")
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    refused(lambda: load_classification(tmp_path / "empty.jsonl"), "empty.jsonl: holds no examples")
    (tmp_path / "latin1.jsonl").write_bytes('{"text": "caf\xe9", "label": 1}\n'.encode("latin-1"))
    refused(lambda: load_classification(tmp_path / "latin1.jsonl"), "not UTF-8 text")
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps([{"text": "a", "label": 1}], indent=2))
    refused(lambda: load_classification(pretty), r"pretty.json:1: not valid JSON .*expected one JSON value per line")


# --- entities -------------------------------------------------------------------------------------------------------


def test_entities_from_character_spans(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "ner.jsonl",
        {
            "text": "Maria Lopez works for the Red Cross in Nairobi.",
            "entities": [
                {"start": 39, "end": 46, "type": "LOC"},
                {"start": 0, "end": 11, "label": "PER"},
                {"start": 26, "end": 35, "entity_group": "ORG"},
                {"start": 0, "end": 11, "label": "PER"},  # a repeat counts once
            ],
        },
        {"text": "Nothing here.", "entities": []},
    )
    data = load_entities(path)
    assert data.examples == (
        EntityExample(
            "Maria Lopez works for the Red Cross in Nairobi.", ((0, 11, "PER"), (26, 35, "ORG"), (39, 46, "LOC"))
        ),
        EntityExample("Nothing here.", ()),
    )
    text = data.examples[0].text
    assert [text[s:e] for s, e, _ in data.examples[0].spans] == ["Maria Lopez", "Red Cross", "Nairobi"]
    assert data.types == ("LOC", "ORG", "PER")


def test_entities_from_conll_tokens_string_and_id_tags(tmp_path: Path) -> None:
    tokens = ["Maria", "Lopez", "lives", "in", "Nairobi", "."]
    path = jsonl(
        tmp_path / "conll.jsonl",
        {"tokens": tokens, "tags": ["B-PER", "I-PER", "O", "O", "B-LOC", "O"]},
        {"tokens": ["Red", "Cross"], "tags": ["I-ORG", "I-ORG"]},  # I- opening a chunk, as seqeval reads it
    )
    data = load_entities(path)
    assert data.examples == (
        EntityExample("Maria Lopez lives in Nairobi .", ((0, 11, "PER"), (21, 28, "LOC"))),
        EntityExample("Red Cross", ((0, 9, "ORG"),)),
    )
    ids = jsonl(tmp_path / "ids.jsonl", {"tokens": tokens, "ner_tags": [1, 2, 0, 0, 5, 0]})
    assert load_entities(ids, label_names=NER).examples[0] == data.examples[0]
    assert load_entities(ids, id2label=dict(enumerate(NER))).examples[0] == data.examples[0]
    refused(lambda: load_entities(ids), r"ids.jsonl:1: 'ner_tags' are ids: give the tag names")
    refused(lambda: load_entities(ids, label_names=[]), r"ids.jsonl:1: 'ner_tags' are ids: give the tag names")
    refused(lambda: load_entities(ids, label_names=NER[:3]), r":1: tag id 5 is not one of the 3 tag names")
    # A space inside a token (a multi-word token) keeps the offsets aligned with the joined text.
    spaced = jsonl(tmp_path / "spaced.jsonl", {"tokens": ["in", "New York"], "tags": ["O", "B-LOC"]})
    assert load_entities(spaced).examples == (EntityExample("in New York", ((3, 11, "LOC"),)),)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (
            {"text": "abc", "entities": [{"start": 0, "end": 4, "label": "X"}]},
            r"entities\[0\] span 0..4 is empty or outside the text \(3",
        ),
        ({"text": "abc", "entities": [{"start": 1, "end": 1, "label": "X"}]}, r"span 1..1 is empty"),
        ({"text": "abc", "entities": [{"start": -1, "end": 2, "label": "X"}]}, r"span -1..2"),
        ({"text": "abc", "entities": [{"start": "0", "end": 2, "label": "X"}]}, r"needs integer 'start' and 'end'"),
        ({"text": "abc", "entities": [{"start": 0, "end": True, "label": "X"}]}, r"needs integer 'start' and 'end'"),
        ({"text": "abc", "entities": [{"start": 0, "end": 2}]}, r"entities\[0\] has no 'label'"),
        (
            {"text": "abc", "entities": [{"start": 0, "end": 2, "label": ""}]},
            r"entities\[0\].label must be a non-empty",
        ),
        ({"text": "abc", "entities": ["PER"]}, r"entities\[0\] must be an object, not a string"),
        ({"text": "abc"}, r"'entities' must be a list, not null"),
        ({"tokens": ["a", "b"], "tags": ["O"]}, r"one tag per token \(2 tokens, 1\)"),
        ({"tokens": ["a"]}, r"has 'tokens' but no 'tags'"),
        ({"tokens": [], "tags": []}, r"'tokens' must be a non-empty list"),
        ({"tokens": [" a"], "tags": ["O"]}, r"tokens\[0\] must be a non-empty string without surrounding spaces"),
        ({"tokens": ["a"], "tags": [None]}, r"'tags' must hold strings or integers, not None"),
        ({"words": ["a"]}, r"has neither 'text' with 'entities' nor 'tokens' with 'tags'"),
    ],
)
def test_entity_refusals(tmp_path: Path, record: dict[str, object], message: str) -> None:
    path = jsonl(tmp_path / "bad.jsonl", {"text": "fine", "entities": []}, record)
    assert refused(lambda: load_entities(path), message).startswith(f"{path}:2: ")


def test_entity_files_must_be_json_lines_with_examples(tmp_path: Path) -> None:
    (tmp_path / "ner.csv").write_text("text\n")
    refused(lambda: load_entities(tmp_path / "ner.csv"), r"entity data files must end in \.jsonl, \.json")
    refused(lambda: load_entities(jsonl(tmp_path / "empty.jsonl")), "holds no examples")


# --- retrieval ------------------------------------------------------------------------------------------------------


def test_retrieval_merges_queries_and_deduplicates_passages(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "pairs.jsonl",
        {"query": "q1", "positive": "p1"},
        {"query": "q2", "positives": ["p2", "p1"]},
        {"passage": "p3"},
        {"query": "q1", "passage": "p4"},
        {"query": "q3", "positive": "p3", "negatives": ["p5", "p2"]},
        {"passage": "p1"},
    )
    assert load_retrieval(path) == RetrievalData(
        queries=("q1", "q2", "q3"),
        passages=("p1", "p2", "p3", "p4", "p5"),
        relevant=(frozenset({0, 3}), frozenset({0, 1}), frozenset({2})),
    )


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"query": "q"}, r":2: a query needs a 'positive' passage"),
        ({"query": "q", "positives": []}, r":2: a query needs a 'positive' passage"),
        ({"query": "q", "positive": ""}, r":2: 'positive' must be a non-empty string, not ''"),
        ({"query": "q", "positives": ["a", 3]}, r":2: 'positives\[1\]' must be a non-empty string, not 3"),
        ({"query": 7, "positive": "p"}, r":2: 'query' must be a string, not a number"),
        ({"passage": None}, r":2: 'passage' must be a string, not null"),
        ({"text": "t"}, r":2: has neither 'query' nor 'passage'"),
    ],
)
def test_retrieval_refusals(tmp_path: Path, record: dict[str, object], message: str) -> None:
    path = jsonl(tmp_path / "bad.jsonl", {"query": "ok", "positive": "fine"}, record)
    refused(lambda: load_retrieval(path), message)


def test_retrieval_needs_a_query(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "only.jsonl", {"passage": "p"})
    assert refused(lambda: load_retrieval(path), "holds no queries") == f"{path}: holds no queries"


# --- calibration texts ----------------------------------------------------------------------------------------------


def test_texts_from_txt_lines_with_a_limit(tmp_path: Path) -> None:
    path = tmp_path / "calib.txt"
    path.write_text("first line\n\n   \n  second line  \nthird\n", encoding="utf-8")
    assert load_texts(path) == ("first line", "second line", "third")
    assert load_texts(path, limit=2) == ("first line", "second line")


def test_texts_from_json_lines_of_every_shape(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "calib.jsonl",
        '"a plain string"',
        '""',
        {"text": "a text", "label": 1},
        {"text": "a text", "text_pair": "and its pair"},
        {"question": "Who?", "context": "Maria did."},
        {"premise": "P.", "hypothesis": "H."},
        {"question": "Who?", "sentence": "Maria."},
        {"query": "a query", "positive": "its passage"},
        {"passage": "a distractor"},
        {"tokens": ["Maria", "Lopez"], "tags": ["B-PER", "I-PER"]},
        "",
    )
    assert load_texts(path) == (
        "a plain string",
        "a text",
        "a text and its pair",
        "Who? Maria did.",
        "P. H.",
        "Who? Maria.",
        "a query",
        "a distractor",
        "Maria Lopez",
    )


def test_texts_from_csv(tmp_path: Path) -> None:
    path = tmp_path / "calib.csv"
    path.write_text("label,text,text_pair\n1,hello,world\n0,alone,\n", encoding="utf-8")
    assert load_texts(path) == ("hello world", "alone")


def test_text_refusals(tmp_path: Path) -> None:
    numbers = jsonl(tmp_path / "n.jsonl", '"hi"', 42)
    refused(lambda: load_texts(numbers), r"n.jsonl:2: expected a string or an object, not a number")
    fields = jsonl(tmp_path / "f.jsonl", {"label": 1})
    refused(lambda: load_texts(fields), r"f.jsonl:1: has no text field")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    refused(lambda: load_texts(blank), "holds no texts")
    refused(lambda: load_texts(numbers, limit=0), "at least 1")
    (tmp_path / "x.md").write_text("hi")
    refused(lambda: load_texts(tmp_path / "x.md"), r"must end in \.txt, \.jsonl, \.json, \.csv")
    (tmp_path / "no_text.csv").write_text("query\nq\n")
    refused(lambda: load_texts(tmp_path / "no_text.csv"), r"no_text.csv:1: the CSV header \(query\) has no 'text'")
