"""question-answering: the extractive answer span of a question in a context (container/qa.py does the text work),
answered as `{"answer", "score", "start", "end"}` per question, as transformers' QuestionAnsweringPipeline does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from container.qa import Answer, Feature, QAProcessor
from container.tasks.base import BadInput, BatchOutputs, Notes, WindowOutputs, check_known, check_shapes, kind_of
from container.tasks.base import text_input as _text


@dataclass(frozen=True)
class Question:
    question: str
    context: str


class QuestionAnswering:
    name = "question-answering"
    example = "a JSON object with 'question' and 'context'"

    def __init__(self, processor: QAProcessor) -> None:
        self.processor = processor
        self.buckets = processor.buckets

    @classmethod
    def unbound(cls) -> QuestionAnswering:
        """One that only parses requests (no tokenizer): what payload parsing defaults to."""
        task = cls.__new__(cls)
        task.buckets = []
        return task

    def parse_parameters(self, raw: Mapping[str, Any]) -> None:
        check_known(raw, (), self.name)

    def parse_item(self, raw: Any, where: str) -> Question:
        if not isinstance(raw, dict):
            raise BadInput(f"{where} must be a JSON object with 'question' and 'context', got {kind_of(raw)}")
        fields = {}
        for name in ("question", "context"):
            if name not in raw:
                raise BadInput(f"{where} is missing the field {name!r}")
            fields[name] = _text(raw[name], where, repr(name))
        version = raw.get("version")
        if version is not None and not isinstance(version, str | int | float):
            raise BadInput(f"{where}: 'version' must be a string or number, got {kind_of(version)}")
        return Question(fields["question"], fields["context"])

    def item_chars(self, item: Question) -> int:
        return len(item.question) + len(item.context)

    def featurize(self, item: Question, params: None) -> list[Feature]:
        return self.processor.featurize(item.question, item.context)

    def filler_feature(self, bucket: int) -> Feature:
        return self.processor.filler_feature(bucket)

    def check_outputs(self, outputs: BatchOutputs, batch: int, seq: int) -> None:
        check_shapes(outputs, [(batch, seq), (batch, seq)], "start/end logits")

    def decode(
        self, item: Question, features: Sequence[Feature], outputs: Sequence[WindowOutputs], params: None
    ) -> Answer:
        return self.processor.decode(item.context, list(features), [(out[0], out[1]) for out in outputs])

    def render(
        self, items: Sequence[Question], results: Sequence[Answer], batch: bool, params: None
    ) -> tuple[Any, Notes]:
        answers = [a.to_dict() for a in results]
        return (answers if batch else answers[0]), Notes()


def qa_processor(task: object) -> QAProcessor:
    """The question-answering text processor behind a task (what QA-only tools, such as benchmarks, drive)."""
    if not isinstance(task, QuestionAnswering):
        raise TypeError(f"a question-answering model is needed, not a {getattr(task, 'name', type(task).__name__)} one")
    return task.processor
