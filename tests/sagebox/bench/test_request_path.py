from __future__ import annotations

import json

import pytest

from sagebox.bench.request_path import SHORT_SENTENCE, short_body


def test_each_task_gets_its_short_request() -> None:
    squad = b'{"question": "q", "context": "c"}'
    assert short_body("question-answering", squad) == squad
    for task in ("feature-extraction", "text-classification", "token-classification"):
        assert json.loads(short_body(task, squad)) == {"inputs": SHORT_SENTENCE}
    with pytest.raises(KeyError):
        short_body("summarization", squad)


def test_the_short_sentence_is_sixteen_tokens_for_minilm() -> None:
    from tokenizers import Tokenizer

    from sagebox.demo.models import minilm_source_dir

    tokenizer = Tokenizer.from_file(str(minilm_source_dir() / "tokenizer.json"))
    tokenizer.no_padding()  # the file pads to a fixed length; the server sets its own padding
    assert len(tokenizer.encode(SHORT_SENTENCE).ids) == 16
