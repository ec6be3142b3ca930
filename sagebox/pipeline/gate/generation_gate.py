"""The INT8 gate of a text-generation model: INT8 is kept only if the serving engine, run on both directories, finds
it close to FP32 on two counts.

- Perplexity on the built-in held-out text (perplexity.py): INT8's over FP32's, at most `max_perplexity_ratio`. It
  measures the whole next-token distribution on prose, averaged over every token.
- Greedy agreement on the built-in chat prompts (greedy.py, agreement.py): the share of generated token positions where
  INT8 picks FP32's token, at least `min_agreement`. It measures what a user sees, the argmax of chat answers, where
  an early flip changes the rest of the answer.
The measurements (`GateMeasures`) are kept in the build's report, so a rerun judges them against the limits it is
given without running the models again.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from container.manifest import Manifest, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.gate.agreement import Agreement, agreement
from sagebox.pipeline.gate.generation_limits import GenerationLimits
from sagebox.pipeline.gate.greedy import Prompts, model_greedy, prompts_of
from sagebox.pipeline.gate.perplexity import Perplexity, load_cpu_model, model_perplexity


@dataclass(frozen=True)
class VariantMeasures:
    """One directory's side of the gate."""

    variant: str
    perplexity: Perplexity
    greedy: list[list[int]]
    prompts: Prompts


@dataclass(frozen=True)
class GateMeasures:
    fp32: Perplexity
    int8: Perplexity
    agreement: Agreement
    prompts: str  # what the greedy tokens were generated from
    seconds: float  # measuring them (both directories' greedy tokens, INT8's perplexity, FP32's when not reused)

    @property
    def perplexity_ratio(self) -> float:
        return self.int8.perplexity / self.fp32.perplexity

    def summary(self) -> dict[str, object]:
        return {
            "perplexity": {
                "fp32": self.fp32.summary(),
                "int8": self.int8.summary(),
                "ratio": round(self.perplexity_ratio, 6),
            },
            "agreement": self.agreement.summary(),
            "prompts": self.prompts,
            "seconds": round(self.seconds, 3),
        }

    @classmethod
    def from_summary(cls, data: Mapping[str, Any]) -> GateMeasures:
        perplexity = data["perplexity"]
        return cls(
            Perplexity(**perplexity["fp32"]),
            Perplexity(**perplexity["int8"]),
            Agreement.from_summary(data["agreement"]),
            str(data["prompts"]),
            float(data["seconds"]),
        )


@dataclass(frozen=True)
class GenerationGate:
    measures: GateMeasures
    limits: GenerationLimits

    @property
    def perplexity_passed(self) -> bool:
        return self.measures.perplexity_ratio <= self.limits.max_perplexity_ratio + 1e-12

    @property
    def agreement_passed(self) -> bool:
        return self.measures.agreement.share >= self.limits.min_agreement - 1e-12

    @property
    def passed(self) -> bool:
        return self.perplexity_passed and self.agreement_passed

    def message(self) -> str:
        m, limits = self.measures, self.limits
        a = m.agreement
        verdict = "passed" if self.passed else "FAILED"
        return (
            f"accuracy gate {verdict}: INT8 perplexity {m.int8.perplexity:.3f} vs FP32 {m.fp32.perplexity:.3f} "
            f"(ratio {m.perplexity_ratio:.4f}, at most {limits.max_perplexity_ratio:.4f}); greedy agreement with FP32 "
            f"{a.share:.3f} of {a.positions} tokens (at least {limits.min_agreement:.3f}; {a.prompts_equal} of "
            f"{a.prompts} prompts equal, first difference at token {a.mean_first_divergence:.1f} on average)"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "passed": self.passed,
            "message": self.message(),
            "limits": self.limits.to_dict(),
            **self.measures.summary(),
        }

    def summary(self) -> dict[str, object]:
        """`sagebox evaluate --json` of a build's directories."""
        return self.to_dict()


def measure_variant(
    model_dir: Path,
    manifest: Manifest,
    texts: Sequence[str] | None = None,
    data: str | None = None,
    perplexity: Perplexity | None = None,
) -> VariantMeasures:
    """A directory's perplexity (unless given: measured before on the same files) and greedy tokens, loaded once."""
    model = load_cpu_model(model_dir, manifest)
    measured = perplexity or model_perplexity(model, texts, data=data)
    prompts = prompts_of(model)
    return VariantMeasures(manifest.variant, measured, model_greedy(model, prompts), prompts)


def compare(fp32: VariantMeasures, int8: VariantMeasures, seconds: float) -> GateMeasures:
    if fp32.prompts.ids != int8.prompts.ids:
        raise SageboxError("the FP32 and INT8 directories make different prompts: their tokenizers differ")
    return GateMeasures(
        fp32.perplexity, int8.perplexity, agreement(fp32.greedy, int8.greedy), fp32.prompts.describe(), seconds
    )


def measure_gate(
    fp32_dir: Path,
    int8_dir: Path,
    *,
    fp32_manifest: Manifest | None = None,
    int8_manifest: Manifest | None = None,
    fp32_perplexity: Perplexity | None = None,
    texts: Sequence[str] | None = None,
    data: str | None = None,
) -> GateMeasures:
    """Both directories through the serving engine: perplexity (FP32's reused when given) and greedy tokens."""
    start = time.perf_counter()
    fp32 = measure_variant(fp32_dir, fp32_manifest or load_verified(fp32_dir), texts, data, fp32_perplexity)
    int8 = measure_variant(int8_dir, int8_manifest or load_verified(int8_dir), texts, data)
    return compare(fp32, int8, time.perf_counter() - start)


def is_generation_build(folder: Path) -> bool:
    """Whether `folder` is a text-generation build's work folder (fp32/ and int8/ model directories, no manifest of
    its own), which `sagebox evaluate` compares."""
    return (
        not (folder / "manifest.json").exists()
        and (folder / "fp32" / "manifest.json").is_file()
        and (folder / "int8" / "manifest.json").is_file()
    )


def evaluate_generation_build(
    work_dir: Path, texts: Sequence[str] | None = None, data: str | None = None, limits: GenerationLimits | None = None
) -> GenerationGate:
    """`sagebox evaluate` of a build's work folder: each variant's perplexity, the ratio and the greedy agreement,
    judged against the default limits."""
    manifests = {variant: load_verified(work_dir / variant) for variant in ("fp32", "int8")}
    for variant, manifest in manifests.items():
        if manifest.task != "text-generation" or manifest.variant != variant:
            raise SageboxError(
                f"{work_dir / variant} holds a {manifest.task} {manifest.variant} model, not the text-generation "
                f"{variant} directory of a build"
            )
    measures = measure_gate(
        work_dir / "fp32",
        work_dir / "int8",
        fp32_manifest=manifests["fp32"],
        int8_manifest=manifests["int8"],
        texts=texts,
        data=data,
    )
    return GenerationGate(measures, limits or GenerationLimits())
