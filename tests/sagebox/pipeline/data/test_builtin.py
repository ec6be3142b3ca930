"""The built-in calibration data: the demo corpus' first articles, unchanged (so a build without data calibrates and
gates on what it did before the pipeline and the demo were parted), checked spans, and enough of each kind."""

from __future__ import annotations

import json

from sagebox.demo import qa_corpus
from sagebox.pipeline.data import builtin


def test_the_builtin_questions_are_the_corpus_first_ones_unchanged() -> None:
    corpus = qa_corpus.examples(qa_corpus.load())
    got = builtin.qa_examples()
    assert len(got) == builtin.DEFAULT_CALIBRATION_TEXTS
    assert got == corpus[: len(got)]


def test_the_builtin_sentences_are_the_corpus_sentences() -> None:
    contexts = [article.context for article in qa_corpus.load()]
    texts = builtin.calibration_texts()
    assert len(texts) == builtin.DEFAULT_CALIBRATION_TEXTS
    assert texts == builtin.sentences_of(contexts, builtin.DEFAULT_CALIBRATION_TEXTS)
    assert builtin.calibration_texts(7) == texts[:7]
    assert all(len(text) > 20 and text.endswith(".") for text in texts)


def test_the_file_holds_whole_articles_of_the_corpus_and_nothing_else() -> None:
    document = json.loads(builtin.QA_FILE.read_text(encoding="utf-8"))
    titles = [article["title"] for article in document["data"]]
    corpus = qa_corpus.load()
    assert titles == [article.title for article in corpus[: len(titles)]]
    assert len(builtin.qa_examples(10_000)) == sum(len(article.examples) for article in corpus[: len(titles)])


def test_sentences_split_on_full_stops_and_skip_short_ones() -> None:
    contexts = ["A short one. This sentence is long enough to count. Tiny.", "Another long sentence without a stop"]
    assert builtin.sentences_of(contexts, 10) == [
        "This sentence is long enough to count.",
        "Another long sentence without a stop.",
    ]
    assert builtin.sentences_of(contexts, 1) == ["This sentence is long enough to count."]


def test_the_heldout_text_is_whole_paragraphs_of_prose() -> None:
    texts = builtin.heldout_texts()
    assert len(texts) == 6
    assert all(300 < len(text) < 500 and text.endswith(".") and "\n" not in text and "  " not in text for text in texts)
    raw = builtin.HELDOUT_FILE.read_text(encoding="utf-8")
    assert [" ".join(text.split()) for text in raw.split("\n\n") if text.strip()] == texts


def test_paragraphs_split_on_blank_lines_and_join_wrapped_lines() -> None:
    assert builtin.paragraphs("One line\nwrapped.\n\n\n  Two.  \r\n\r\nThree") == ["One line wrapped.", "Two.", "Three"]


def test_the_chat_prompts_are_sixteen_distinct_short_requests() -> None:
    prompts = builtin.chat_prompts()
    assert len(prompts) == len(set(prompts)) == 16
    assert all(10 < len(prompt) < 80 and prompt == prompt.strip() and prompt[-1] in ".?" for prompt in prompts)
