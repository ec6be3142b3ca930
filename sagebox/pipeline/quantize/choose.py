"""Which INT8 build each CPU kind loads: builds for other runtimes timed against the primary on the build machine,
the rest of the kinds from the measured table (infra/data/cpu_kinds.json), merged into one model directory.

In: the primary INT8 directory (it runs on every CPU: the fallback) and gated builds for other runtimes. Out: the
primary directory holding each other build under a folder of its runtime's name, its manifest's `alternatives`
naming the CPU kinds that load it and why (container/cpu_kind.py decides at load).
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from container.cpu_kind import detect
from container.manifest import MANIFEST_NAME, Manifest, RuntimeBuild, hash_files, load_verified
from container.predictor import Predictor, PredictorOptions
from infra.catalog import int8_runtime_preferences

# Sequence lengths the build times each candidate at (batch 1), where the model's buckets have them.
TIMED_LENGTHS = (128, 384)


@dataclass(frozen=True)
class Timing:
    """P50 milliseconds per sequence length, of each build, measured round-robin in one run."""

    cpu_kind: str
    threads: int
    rounds: int
    p50_ms: Mapping[str, Mapping[int, float]]  # runtime -> length -> ms

    def faster(self, runtime: str, than: str) -> bool:
        """`runtime` is faster at every timed length (a tie keeps the fallback)."""
        mine, theirs = self.p50_ms[runtime], self.p50_ms[than]
        return all(mine[length] < theirs[length] for length in mine)

    def describe(self, runtime: str, than: str) -> str:
        mine, theirs = self.p50_ms[runtime], self.p50_ms[than]
        parts = [f"{mine[n]:.1f} against {theirs[n]:.1f} ms at {n} tokens" for n in sorted(mine)]
        return (
            f"measured on the build machine ({self.cpu_kind}, {self.threads} threads, P50 of {self.rounds} "
            f"round-robin calls, batch 1): {runtime} {'; '.join(parts)} for {than}"
        )


def time_builds(dirs: Mapping[str, Path], threads: int, rounds: int = 15, cpu_kind: str | None = None) -> Timing:
    """Each directory's model called on one filler window per timed length, the builds interleaved call by call."""
    kind = cpu_kind or detect({})
    predictors = {runtime: Predictor.load(d, PredictorOptions(threads=threads)) for runtime, d in dirs.items()}
    buckets = next(iter(predictors.values())).task.buckets
    lengths = sorted({min((b for b in buckets if b >= n), default=buckets[-1]) for n in TIMED_LENGTHS})
    samples: dict[str, dict[int, list[float]]] = {r: {n: [] for n in lengths} for r in predictors}
    for n in lengths:
        features = {r: [p.task.filler_feature(n)] for r, p in predictors.items()}
        for p in predictors.values():
            p.predict_batch(features[next(iter(features))])  # a first call per length, untimed
        for round_ in range(rounds):
            order = list(predictors)
            order = order[round_ % len(order) :] + order[: round_ % len(order)]
            for runtime in order:
                started = time.perf_counter()
                predictors[runtime].predict_batch(features[runtime])
                samples[runtime][n].append((time.perf_counter() - started) * 1e3)
    for p in predictors.values():
        p.close()
    p50 = {r: {n: round(statistics.median(ms), 2) for n, ms in by_n.items()} for r, by_n in samples.items()}
    return Timing(kind, threads, rounds, p50)


def kinds_for(runtime: str, fallback: str, timing: Timing | None) -> tuple[list[str], str]:
    """The CPU kinds that load `runtime`'s build rather than the fallback, and why, for the manifest."""
    preferences = int8_runtime_preferences()
    kinds = {kind for kind, pref in preferences.items() if pref.runtime == runtime}
    reasons = [f"{k}: infra/data/cpu_kinds.json ({preferences[k].evidence})" for k in sorted(kinds)]
    if timing is not None and runtime in timing.p50_ms and fallback in timing.p50_ms:
        kind = timing.cpu_kind
        kinds.discard(kind)
        reasons = [r for r in reasons if not r.startswith(f"{kind}:")]
        if timing.faster(runtime, fallback):
            kinds.add(kind)
            reasons.insert(0, f"{kind}: {timing.describe(runtime, fallback)}")
    return sorted(kinds), "; ".join(reasons)


def merge_alternative(primary_dir: Path, other_dir: Path, kinds: Sequence[str], reason: str) -> Manifest:
    """Copy `other_dir`'s model files into `primary_dir`/<runtime>/ and list them as an alternative build (the
    tokenizer, buckets and task are the primary's: both are the same model)."""
    primary, other = load_verified(primary_dir), load_verified(other_dir)
    folder = other.runtime
    for name in other.files:
        if name == other.tokenizer.file:
            continue
        target = primary_dir / folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(other_dir / name, target)
    build = RuntimeBuild(
        runtime=other.runtime,
        model_file=f"{folder}/{other.model_file}",
        quantization=other.quantization,
        cpu_kinds=list(kinds),
        reason=reason,
    )
    merged = dataclasses.replace(
        primary,
        alternatives=[*[b for b in primary.alternatives if b.runtime != build.runtime], build],
        files=hash_files(primary_dir),
    )
    (primary_dir / MANIFEST_NAME).write_text(merged.to_json(), encoding="utf-8")
    return merged
