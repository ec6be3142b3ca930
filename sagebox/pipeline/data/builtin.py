"""Sagebox's built-in calibration data, for a build whose user gives none: a few dozen paragraphs of varied English
prose with questions about them (`builtin/qa.json`, SQuAD v1.1), written for Sagebox. QA calibrates on and, with no
`--eval` data, compares INT8's answers with FP32's on its questions; the other tasks use its sentences.

The file is the first articles of the demo's hand-written corpus (sagebox/demo/corpus/, same authors and license),
copied here because the pipeline never imports the demo package; tests/sagebox/pipeline/data/test_builtin.py holds
the two equal.

Text generation's held-out text (`builtin/heldout_text.txt`): a few paragraphs of plain English prose written for
Sagebox, on which a built decoder's perplexity is reported when the user gives no text of their own. Its chat prompts
(`builtin/chat_prompts.txt`, one a line): short requests of varied kinds (facts, arithmetic, code, translation, a
story, a poem, advice, an email) that the INT8 gate generates from greedily with FP32 and INT8 and compares.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from sagebox.pipeline.data.squad import QAExample, load_squad

QA_FILE = Path(__file__).resolve().parent / "builtin" / "qa.json"
HELDOUT_FILE = QA_FILE.with_name("heldout_text.txt")
CHAT_PROMPTS_FILE = QA_FILE.with_name("chat_prompts.txt")
DEFAULT_CALIBRATION_TEXTS = 200  # calibration inputs when the user gives none


@cache
def _examples() -> tuple[QAExample, ...]:
    return tuple(load_squad(QA_FILE, require_answers=True, check_spans=True))


def qa_examples(limit: int = DEFAULT_CALIBRATION_TEXTS) -> list[QAExample]:
    """The built-in questions with their contexts and answers, in file order."""
    return list(_examples()[:limit])


def sentences_of(contexts: list[str], limit: int) -> list[str]:
    """Sentences longer than 20 characters, each ending with a full stop, in order, at most `limit`."""
    sentences: list[str] = []
    for context in contexts:
        for sentence in context.replace("\n", " ").split(". "):
            text = sentence.strip()
            if len(text) > 20:
                sentences.append(text if text.endswith(".") else text + ".")
            if len(sentences) >= limit:
                return sentences
    return sentences


def calibration_texts(limit: int = DEFAULT_CALIBRATION_TEXTS) -> list[str]:
    """Sentences of the built-in paragraphs: calibration text when the user gives none."""
    contexts = list(dict.fromkeys(example.context for example in _examples()))
    return sentences_of(contexts, limit)


def paragraphs(text: str) -> list[str]:
    """The paragraphs of `text` (separated by blank lines), each on one line with single spaces."""
    blocks = [" ".join(block.split()) for block in text.replace("\r\n", "\n").split("\n\n")]
    return [block for block in blocks if block]


def heldout_texts() -> list[str]:
    """The built-in held-out paragraphs a text-generation model's perplexity is measured on, in file order."""
    return paragraphs(HELDOUT_FILE.read_text(encoding="utf-8"))


def chat_prompts() -> list[str]:
    """The built-in chat prompts the text-generation INT8 gate generates from, in file order."""
    lines = CHAT_PROMPTS_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip()]
