"""SQuAD v1.1 JSON files: read and validate them into flat examples, and write them back."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError


@dataclass(frozen=True)
class GoldAnswer:
    text: str
    start: int


@dataclass(frozen=True)
class QAExample:
    id: str
    question: str
    context: str
    answers: tuple[GoldAnswer, ...]
    title: str = ""


def load_squad(path: Path, *, require_answers: bool = True, check_spans: bool = False) -> list[QAExample]:
    """Every question in a SQuAD v1.1 file; a malformed or empty file raises one readable SageboxError."""
    path = Path(path)
    if not path.is_file():
        raise SageboxError(f"SQuAD file {path} does not exist")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SageboxError(f"{path} is not valid JSON: {exc}") from None
    examples = parse_squad(document, str(path), require_answers=require_answers, check_spans=check_spans)
    if not examples:
        raise SageboxError(f"{path} holds no questions")
    return examples


def parse_squad(
    document: object, where: str, *, require_answers: bool = True, check_spans: bool = False
) -> list[QAExample]:
    data = _field(document, "data", list, where)
    examples: list[QAExample] = []
    seen: set[str] = set()
    for a, article in enumerate(data):
        at = f"{where}: data[{a}]"
        title = article.get("title", "") if isinstance(article, dict) else ""
        for p, paragraph in enumerate(_field(article, "paragraphs", list, at)):
            pat = f"{at}.paragraphs[{p}]"
            context = _field(paragraph, "context", str, pat)
            if not context.strip():
                raise SageboxError(f"{pat} has an empty context")
            for q, qa in enumerate(_field(paragraph, "qas", list, pat)):
                qat = f"{pat}.qas[{q}]"
                qid = str(_field(qa, "id", (str, int), qat))
                if qid in seen:
                    raise SageboxError(f"{qat} repeats question id {qid!r}")
                seen.add(qid)
                question = _field(qa, "question", str, qat)
                if not question.strip():
                    raise SageboxError(f"{qat} has an empty question")
                raw_answers = qa.get("answers", [])
                if not isinstance(raw_answers, list):
                    raise SageboxError(f"{qat}.answers must be a list")
                answers = tuple(
                    _answer(raw, context, f"{qat}.answers[{i}]", check_spans) for i, raw in enumerate(raw_answers)
                )
                if require_answers and not answers:
                    raise SageboxError(f"{qat} has no gold answers (evaluation needs at least one)")
                examples.append(QAExample(qid, question, context, answers, str(title)))
    return examples


def _answer(raw: object, context: str, where: str, check_span: bool) -> GoldAnswer:
    text = _field(raw, "text", str, where)
    start = raw.get("answer_start", -1) if isinstance(raw, dict) else -1
    if not isinstance(start, int) or isinstance(start, bool):
        raise SageboxError(f"{where}.answer_start must be an integer")
    if check_span and context[start : start + len(text)] != text:
        raise SageboxError(f"{where}: answer {text!r} is not found at answer_start {start} of its context")
    return GoldAnswer(text, start)


def _field(obj: object, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise SageboxError(f"{where} must be a JSON object")
    if name not in obj:
        raise SageboxError(f"{where} has no {name!r}")
    value = obj[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise SageboxError(f"{where}.{name} must be {_json_type(names)}")
    return value


def _json_type(python_names: str) -> str:
    return python_names.replace("str", "a string").replace("list", "a list").replace("int", "an integer")


def to_squad(examples: Iterable[QAExample], version: str = "1.1") -> dict[str, object]:
    """SQuAD v1.1 document: one article per title, one paragraph per distinct context (first-seen order)."""
    articles: dict[str, dict[str, dict[str, Any]]] = {}
    for ex in examples:
        paragraphs = articles.setdefault(ex.title, {})
        paragraph = paragraphs.setdefault(ex.context, {"context": ex.context, "qas": []})
        paragraph["qas"].append(
            {
                "id": ex.id,
                "question": ex.question,
                "answers": [{"text": a.text, "answer_start": a.start} for a in ex.answers],
            }
        )
    return {
        "version": version,
        "data": [{"title": title, "paragraphs": list(ps.values())} for title, ps in articles.items()],
    }


def write_squad(examples: Iterable[QAExample], path: Path) -> None:
    """Write atomically (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(to_squad(examples), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
