"""The hand-written QA corpus the demo model learns from (beside the generators): load, check and split it.

Authoring format, one JSON file per batch under sagebox/demo/corpus/:

    {"batch": "w01", "articles": [
        {"id": "w01-003", "genre": "museum label", "title": "...", "context": "...",
         "qas": [{"q": "Who carved the door?", "a": ["Ilse Marr", "the carver Ilse Marr"]},
                 {"q": "...", "a": [{"text": "1912", "nth": 2}]}]}]}

An answer is its exact text in the context. When that text occurs more than once, `nth` (1-based) names the
occurrence meant; otherwise the text must occur exactly once. Every answer starts and ends on a word boundary,
and the answers of one question overlap (they are different cuts of one place, as in SQuAD). `load` turns the
files into QAExamples with character offsets, so nobody counts characters by hand.

Check a batch while writing it:  python -m sagebox.demo.qa_corpus check FILE [FILE ...]
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagebox.errors import SageboxError
from sagebox.pipeline.data.squad import GoldAnswer, QAExample

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
CONTEXT_WORDS = (35, 260)
QUESTIONS_PER_ARTICLE = (3, 12)
MAX_ANSWER_WORDS = 25
# Words that mark the reference workflow's own sample (sagebox/demo_data.py): the corpus must not teach it.
FORBIDDEN = re.compile(r"\b(rain ?forests?|amazon\w*|jungles?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Article:
    id: str
    genre: str
    title: str
    context: str
    examples: tuple[QAExample, ...]


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch) == "Mn"


def on_word_boundaries(context: str, start: int, end: int) -> bool:
    before = context[start - 1] if start > 0 else " "
    after = context[end] if end < len(context) else " "
    first, last = context[start], context[end - 1]
    return not (_is_word_char(before) and _is_word_char(first)) and not (_is_word_char(after) and _is_word_char(last))


def _occurrences(context: str, text: str) -> list[int]:
    starts, i = [], context.find(text)
    while i >= 0:
        if on_word_boundaries(context, i, i + len(text)):
            starts.append(i)
        i = context.find(text, i + 1)
    return starts


def _answer(raw: object, context: str, where: str) -> GoldAnswer:
    if isinstance(raw, str):
        text, nth = raw, None
    elif isinstance(raw, dict) and isinstance(raw.get("text"), str):
        text, nth = raw["text"], raw.get("nth")
        if nth is not None and (not isinstance(nth, int) or isinstance(nth, bool) or nth < 1):
            raise SageboxError(f"{where}: nth must be a positive integer")
    else:
        raise SageboxError(f"{where}: an answer is a string or {{'text': ..., 'nth': k}}")
    if not text or text != text.strip():
        raise SageboxError(f"{where}: answer {text!r} is empty or has surrounding spaces")
    if len(text.split()) > MAX_ANSWER_WORDS:
        raise SageboxError(f"{where}: answer {text[:40]!r}... is longer than {MAX_ANSWER_WORDS} words")
    starts = _occurrences(context, text)
    if not starts:
        inside = " (it occurs only inside other words)" if text in context else ""
        raise SageboxError(f"{where}: answer {text!r} is not in the context on word boundaries{inside}")
    if nth is None:
        if len(starts) > 1:
            raise SageboxError(f"{where}: answer {text!r} occurs {len(starts)} times: say which with 'nth'")
        return GoldAnswer(text, starts[0])
    if nth > len(starts):
        raise SageboxError(f"{where}: answer {text!r} occurs {len(starts)} times, not {nth}")
    return GoldAnswer(text, starts[nth - 1])


def _article(raw: object, where: str, seen: set[str]) -> Article:
    if not isinstance(raw, dict):
        raise SageboxError(f"{where} must be a JSON object")
    for name in ("id", "genre", "title", "context"):
        if not isinstance(raw.get(name), str) or not raw[name].strip():
            raise SageboxError(f"{where} needs a non-empty string {name!r}")
    aid, context = raw["id"], raw["context"]
    where = f"{where} ({aid})"
    if aid in seen:
        raise SageboxError(f"{where}: id {aid!r} is used twice")
    seen.add(aid)
    n_words = len(context.split())
    if not CONTEXT_WORDS[0] <= n_words <= CONTEXT_WORDS[1]:
        raise SageboxError(f"{where}: the context has {n_words} words, not {CONTEXT_WORDS[0]}-{CONTEXT_WORDS[1]}")
    forbidden = FORBIDDEN.search(context) or FORBIDDEN.search(raw["title"])
    if forbidden:
        raise SageboxError(f"{where}: {forbidden.group(0)!r} is kept out of the corpus (the reference sample's topic)")
    qas = raw.get("qas")
    if not isinstance(qas, list) or not QUESTIONS_PER_ARTICLE[0] <= len(qas) <= QUESTIONS_PER_ARTICLE[1]:
        raise SageboxError(f"{where}: 'qas' must list {QUESTIONS_PER_ARTICLE[0]}-{QUESTIONS_PER_ARTICLE[1]} questions")
    examples: list[QAExample] = []
    asked: set[str] = set()
    for q, qa in enumerate(qas):
        qwhere = f"{where}.qas[{q}]"
        if not isinstance(qa, dict) or not isinstance(qa.get("q"), str) or not isinstance(qa.get("a"), list):
            raise SageboxError(f"{qwhere} must be {{'q': question, 'a': [answers]}}")
        question = qa["q"].strip()
        if not question.endswith("?"):
            raise SageboxError(f"{qwhere}: a question ends with '?': {question!r}")
        if question.lower() in asked:
            raise SageboxError(f"{qwhere}: {question!r} is asked twice")
        asked.add(question.lower())
        if not qa["a"]:
            raise SageboxError(f"{qwhere}: no answers")
        answers = [_answer(a, context, f"{qwhere}.a[{i}]") for i, a in enumerate(qa["a"])]
        spans = [(a.start, a.start + len(a.text)) for a in answers]
        if max(s for s, _ in spans) >= min(e for _, e in spans):
            raise SageboxError(f"{qwhere}: its answers do not overlap: they must be cuts of one place")
        examples.append(QAExample(f"{aid}-{q + 1}", question, context, tuple(answers), raw["title"].strip()))
    return Article(aid, raw["genre"].strip(), raw["title"].strip(), context, tuple(examples))


def load_file(path: Path, seen: set[str] | None = None) -> list[Article]:
    path = Path(path)
    try:
        document: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SageboxError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("articles"), list):
        raise SageboxError(f"{path}: expected {{'batch': ..., 'articles': [...]}}")
    ids = seen if seen is not None else set()
    return [_article(raw, f"{path.name}: articles[{i}]", ids) for i, raw in enumerate(document["articles"])]


def corpus_files(root: Path = CORPUS_DIR) -> list[Path]:
    return sorted(root.glob("*.json"))


def load(paths: Iterable[Path] | None = None) -> list[Article]:
    """Every article of the corpus (or of `paths`), checked; ids unique across files; no context twice."""
    seen: set[str] = set()
    articles: list[Article] = []
    for path in corpus_files() if paths is None else paths:
        articles += load_file(path, seen)
    contexts: dict[str, str] = {}
    for article in articles:
        other = contexts.setdefault(article.context, article.id)
        if other != article.id:
            raise SageboxError(f"articles {other} and {article.id} have the same context")
    return articles


def split(articles: Sequence[Article], dev_every: int = 10) -> tuple[list[Article], list[Article]]:
    """(train, dev): every `dev_every`-th article, in id order, is kept for the dev split."""
    ordered = sorted(articles, key=lambda a: a.id)
    dev = [a for i, a in enumerate(ordered) if dev_every and i % dev_every == dev_every - 1]
    ids = {a.id for a in dev}
    return [a for a in ordered if a.id not in ids], dev


def examples(articles: Iterable[Article]) -> list[QAExample]:
    return [ex for article in articles for ex in article.examples]


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2 or argv[0] != "check":
        print("usage: python -m sagebox.demo.qa_corpus check FILE [FILE ...]", file=sys.stderr)
        return 2
    try:
        articles = load(Path(p) for p in argv[1:])
    except SageboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    n_q = sum(len(a.examples) for a in articles)
    print(f"ok: {len(articles)} articles, {n_q} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
