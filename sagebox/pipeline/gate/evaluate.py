"""EM/F1 of a servable model directory, computed through the serving Predictor (what the endpoint runs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from container.predictor import Predictor, PredictorOptions
from container.qa import Answer, InputTooLong
from sagebox.pipeline.data.squad import QAExample
from sagebox.pipeline.gate.squad_metric import SquadScore, score


@dataclass(frozen=True)
class Evaluation:
    model_dir: str
    variant: str
    runtime: str
    score: SquadScore
    seconds: float
    predictions: dict[str, str]
    too_long: int  # questions the model could not take (scored as unanswered)

    def summary(self) -> dict[str, object]:
        return {
            "model_dir": self.model_dir,
            "variant": self.variant,
            "runtime": self.runtime,
            **self.score.to_dict(),
            "too_long": self.too_long,
            "seconds": round(self.seconds, 3),
        }


def predict_all(predictor: Predictor, examples: Sequence[QAExample], chunk: int = 32) -> tuple[dict[str, str], int]:
    """Answer text per question id; a question too long for the model gets no prediction."""
    predictions: dict[str, str] = {}
    too_long = 0
    for i in range(0, len(examples), chunk):
        part = examples[i : i + chunk]
        try:
            answers: list[Answer | None] = list(predictor.answer_many([(ex.question, ex.context) for ex in part]))
        except InputTooLong:
            # Rare: find the offending question(s) one by one; the rest of the chunk is still answered.
            answers = []
            for ex in part:
                try:
                    answers.append(predictor.answer(ex.question, ex.context))
                except InputTooLong:
                    too_long += 1
                    answers.append(None)
        for ex, answer in zip(part, answers, strict=True):
            if answer is not None:
                predictions[ex.id] = answer.text
    return predictions, too_long


def evaluate_model_dir(
    model_dir: Path,
    examples: Sequence[QAExample],
    options: PredictorOptions | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Evaluation:
    """Verify and load `model_dir` exactly as the server does, answer every question, score the answers."""
    predictor = Predictor.load(Path(model_dir), options)
    started = clock()
    predictions, too_long = predict_all(predictor, examples)
    elapsed = clock() - started
    manifest = predictor.manifest
    return Evaluation(
        str(model_dir),
        manifest.variant,
        manifest.runtime,
        score(examples, predictions),
        elapsed,
        predictions,
        too_long,
    )
