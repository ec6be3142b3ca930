"""What `sagebox bench` sends an endpoint of each task, and how it scores the answers it got back.

- question-answering: SQuAD questions, scored EM/F1 (`em`, `f1`);
- text-classification: texts (pairs), scored accuracy and macro-F1 when they carry labels;
- token-classification: texts, scored entity F1 when they carry entities;
- feature-extraction: the queries and passages of a retrieval set, scored recall@10 once every text was embedded.
Without labelled data a text task's endpoint is timed on calibration text and shows no accuracy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sagebox.pipeline.data import task_data
from sagebox.pipeline.data.squad import QAExample
from sagebox.pipeline.gate import task_metrics

# The columns each task's score fills (report.COLUMNS shows them).
SCORE_KEYS: dict[str, tuple[str, ...]] = {
    "question-answering": ("em", "f1"),
    "text-classification": ("accuracy", "macro_f1"),
    "token-classification": ("entity_f1",),
    "feature-extraction": ("recall_at_10",),
}


class Workload(Protocol):
    @property
    def task(self) -> str: ...

    @property
    def source(self) -> str:
        """What the notes say the requests were."""
        ...

    def __len__(self) -> int: ...

    def body(self, index: int) -> tuple[str, str]:
        """(request key, JSON body) of request `index` (wrapping around the set)."""
        ...

    def answer(self, raw: Any) -> Any:
        """What to keep of one decoded answer for scoring."""
        ...

    def score(self, answers: Mapping[str, Any]) -> dict[str, float]:
        """The task's scores from {request key: kept answer}; {} when the set has no labels (or too few answers)."""
        ...

    def complete(self) -> bool:
        """Whether a score needs an answer to every request of the set (a retrieval set: every text embedded)."""
        ...


@dataclass(frozen=True)
class QuestionWorkload:
    examples: Sequence[QAExample]
    source: str
    task: str = "question-answering"

    def __len__(self) -> int:
        return len(self.examples)

    def body(self, index: int) -> tuple[str, str]:
        example = self.examples[index % len(self.examples)]
        return example.id, json.dumps({"question": example.question, "context": example.context})

    def answer(self, raw: Any) -> Any:
        return raw["answer"]

    def score(self, answers: Mapping[str, Any]) -> dict[str, float]:
        from sagebox.pipeline.gate.squad_metric import score

        asked = [q for q in self.examples if q.id in answers]
        if not asked:
            return {}
        result = score(asked, answers)
        return {"em": result.exact_match, "f1": result.f1}

    def complete(self) -> bool:
        return False


@dataclass(frozen=True)
class TextWorkload:
    """Texts (or text pairs) in the inference toolkit's envelope, and their gold labels or entities if known."""

    task: str
    inputs: Sequence[Any]  # a text, or {"text", "text_pair"}
    source: str
    labels: Sequence[frozenset[str]] | None = None  # text-classification
    entities: Sequence[Sequence[tuple[int, int, str]]] | None = None  # token-classification
    multi_label: bool = False

    def __len__(self) -> int:
        return len(self.inputs)

    def body(self, index: int) -> tuple[str, str]:
        position = index % len(self.inputs)
        return str(position), json.dumps({"inputs": self.inputs[position]})

    def answer(self, raw: Any) -> Any:
        if self.task == "text-classification":
            best = raw[0] if isinstance(raw, list) else raw
            return best["label"]
        return [(e["start"], e["end"], e.get("entity_group", e.get("entity"))) for e in raw]

    def score(self, answers: Mapping[str, Any]) -> dict[str, float]:
        keys = sorted((int(k) for k in answers), key=int)
        if not keys:
            return {}
        if self.task == "text-classification" and self.labels is not None and not self.multi_label:
            result = task_metrics.classification_scores(
                [next(iter(self.labels[k])) for k in keys], [answers[str(k)] for k in keys]
            )
            return {"accuracy": result.accuracy, "macro_f1": result.macro_f1}
        if self.task == "token-classification" and self.entities is not None:
            scored = task_metrics.entity_scores([self.entities[k] for k in keys], [answers[str(k)] for k in keys])
            return {"entity_f1": scored.f1}
        return {}

    def complete(self) -> bool:
        return False


@dataclass(frozen=True)
class RetrievalWorkload:
    """Every query and passage of a retrieval set, one per request; recall@10 once all of them have a vector."""

    data: task_data.RetrievalData | None
    texts: Sequence[str]
    source: str
    task: str = "feature-extraction"

    def __len__(self) -> int:
        return len(self.texts)

    def body(self, index: int) -> tuple[str, str]:
        position = index % len(self.texts)
        return str(position), json.dumps({"inputs": self.texts[position]})

    def answer(self, raw: Any) -> Any:
        return raw

    def score(self, answers: Mapping[str, Any]) -> dict[str, float]:
        import numpy as np

        if self.data is None or len(answers) < len(self.texts):
            return {}
        vectors = np.array([answers[str(i)] for i in range(len(self.texts))], dtype=np.float32)
        queries = vectors[: len(self.data.queries)]
        passages = vectors[len(self.data.queries) :]
        return {"recall_at_10": task_metrics.recall_at_k(queries, passages, self.data.relevant, 10)}

    def complete(self) -> bool:
        return self.data is not None


def text_workload(task: str, path: Path | None) -> Workload:
    """A text task's requests: labelled data from `path`, else Sagebox's built-in calibration text (timing only)."""
    from sagebox.pipeline.data.builtin import calibration_texts as default_calibration_texts

    if task == "feature-extraction":
        if path is None:
            texts = default_calibration_texts()
            return RetrievalWorkload(None, texts, f"Sagebox's built-in text ({len(texts)} sentences, not scored)")
        data = task_data.load_retrieval(path)
        texts = [*data.queries, *data.passages]
        return RetrievalWorkload(data, texts, f"{path} ({len(data.queries)} queries, {len(data.passages)} passages)")
    if path is None:
        texts = default_calibration_texts()
        return TextWorkload(task, texts, f"Sagebox's built-in text ({len(texts)} sentences, not scored)")
    if task == "text-classification":
        labelled = task_data.load_classification(path)
        inputs = [
            e.text if e.text_pair is None else {"text": e.text, "text_pair": e.text_pair} for e in labelled.examples
        ]
        labels = [frozenset(e.labels) for e in labelled.examples]
        return TextWorkload(
            task, inputs, f"{path} ({len(inputs)} texts)", labels=labels, multi_label=labelled.multi_label
        )
    entities = task_data.load_entities(path)
    return TextWorkload(
        task,
        [e.text for e in entities.examples],
        f"{path} ({len(entities.examples)} texts)",
        entities=[list(e.spans) for e in entities.examples],
    )
