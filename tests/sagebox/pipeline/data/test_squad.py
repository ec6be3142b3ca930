from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import GoldAnswer, QAExample, load_squad, write_squad

GOOD = {
    "version": "1.1",
    "data": [
        {
            "title": "t",
            "paragraphs": [
                {
                    "context": "Denver won in 2016.",
                    "qas": [
                        {
                            "id": "a",
                            "question": "Who won?",
                            "answers": [{"text": "Denver", "answer_start": 0}],
                        },
                        {"id": "b", "question": "When?", "answers": [{"text": "2016", "answer_start": 14}]},
                    ],
                }
            ],
        }
    ],
}


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "data.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_load_flattens_questions(tmp_path: Path) -> None:
    examples = load_squad(_write(tmp_path, GOOD), check_spans=True)
    assert [e.id for e in examples] == ["a", "b"]
    assert examples[1].context == "Denver won in 2016."
    assert examples[1].answers == (GoldAnswer("2016", 14),)


def _broken(path: str, value: object) -> dict:
    doc = json.loads(json.dumps(GOOD))
    target = doc
    keys = path.split("/")
    for key in keys[:-1]:
        target = target[int(key)] if key.isdigit() else target[key]
    last = keys[-1]
    if value is KeyError:
        del target[int(last) if last.isdigit() else last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return doc


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("{not json", "is not valid JSON"),
        ([1, 2], "must be a JSON object"),
        ({"version": "1.1"}, "has no 'data'"),
        ({"data": []}, "holds no questions"),
        (_broken("data/0/paragraphs/0/qas/0/question", KeyError), "has no 'question'"),
        (_broken("data/0/paragraphs/0/qas/0/question", 3), "question must be a string"),
        (_broken("data/0/paragraphs/0/context", "  "), "empty context"),
        (_broken("data/0/paragraphs/0/qas/1/id", "a"), "repeats question id 'a'"),
        (_broken("data/0/paragraphs/0/qas/0/answers", "Denver"), "answers must be a list"),
        (_broken("data/0/paragraphs/0/qas/0/answers", []), "has no gold answers"),
        (_broken("data/0/paragraphs/0/qas/0/answers/0/answer_start", "0"), "answer_start must be an integer"),
    ],
)
def test_malformed_files_give_one_clear_line(tmp_path: Path, document: object, message: str) -> None:
    with pytest.raises(SageboxError) as info:
        load_squad(_write(tmp_path, document))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_location_is_named(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[1\]"):
        load_squad(_write(tmp_path, _broken("data/0/paragraphs/0/qas/1/question", KeyError)))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="does not exist"):
        load_squad(tmp_path / "nope.json")


def test_calibration_data_needs_no_answers(tmp_path: Path) -> None:
    examples = load_squad(_write(tmp_path, _broken("data/0/paragraphs/0/qas/0/answers", [])), require_answers=False)
    assert examples[0].answers == ()


def test_span_check(tmp_path: Path) -> None:
    doc = _broken("data/0/paragraphs/0/qas/1/answers/0/answer_start", 3)
    assert load_squad(_write(tmp_path, doc))[1].answers[0].start == 3  # not checked by default
    with pytest.raises(SageboxError, match="not found at answer_start 3"):
        load_squad(_write(tmp_path, doc), check_spans=True)


def test_write_then_load_round_trips(tmp_path: Path) -> None:
    examples = [
        QAExample("1", "q1?", "ctx one", (GoldAnswer("one", 4),), "A"),
        QAExample("2", "q2?", "ctx one", (GoldAnswer("ctx", 0), GoldAnswer("ctx one", 0)), "A"),
        QAExample("3", "q3?", "other", (GoldAnswer("other", 0),), "B"),
    ]
    path = tmp_path / "out" / "x.json"
    write_squad(examples, path)
    assert load_squad(path, check_spans=True) == examples
    document = json.loads(path.read_text())
    assert [len(a["paragraphs"]) for a in document["data"]] == [1, 1]  # shared context -> one paragraph
    assert list(path.parent.iterdir()) == [path]  # no temp file left behind
