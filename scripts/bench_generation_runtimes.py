#!/usr/bin/env python3
"""Decoder runtimes side by side on one model directory: ms per decoding step at each batch size and the prefill of
one prompt, for the Sagebox engine as served (eager prompt, TorchScript decode), the engine all eager, transformers
with a StaticCache (eager and torch.compile), ONNX Runtime with past key values, onnxruntime-genai (from another
interpreter: --genai-python) and transformers' generate(), interleaved round-robin, at each thread count.

    .venv/bin/python scripts/bench_generation_runtimes.py --model /tmp/smol-work/fp32 [--batch 1,16] [--rounds 20]
        [--threads 1,2] [--candidates sagebox,onnxruntime,...] [--genai-python /tmp/venv/bin/python] [--out FILE]

--model: a directory with transformers' config.json and model.safetensors (a `sagebox build --task text-generation`
FP32 directory is one). The measurement lives in `sagebox.bench.generation_runtimes`; this prints its table and
writes the results JSON (with the CPU, its flags and the packages' versions) to --out.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from sagebox.bench.generation_runtimes import BATCHES, CANDIDATES, CONTEXT, PREFILL_TOKENS, ROUNDS, measure, table


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive integers")
    return values


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown candidates {unknown} (known: {', '.join(CANDIDATES)})")
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", type=Path, required=True, help="model directory (config.json + model.safetensors)")
    p.add_argument("--batch", type=_ints, default=list(BATCHES), help="decoding batch sizes (default 1,16)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    p.add_argument("--threads", type=_ints, default=[2], help="intra-op thread counts, one after the other (2)")
    p.add_argument("--context", type=int, default=CONTEXT, help=f"tokens cached before a step ({CONTEXT})")
    p.add_argument("--prefill", type=int, default=PREFILL_TOKENS, help=f"prompt tokens prefilled ({PREFILL_TOKENS})")
    p.add_argument("--candidates", type=_names, default=list(CANDIDATES), help=", ".join(CANDIDATES))
    p.add_argument("--genai-python", help="an interpreter with onnxruntime-genai (e.g. a scratch venv's)")
    p.add_argument("--work", type=Path, help="exports and builds (default: a new temporary directory)")
    p.add_argument("--out", type=Path, default=Path("generation-runtimes.json"), help="results JSON")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if not (args.model / "config.json").is_file() or not (args.model / "model.safetensors").is_file():
        p.error(f"{args.model} has no config.json and model.safetensors")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()

    def say(text: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {text}", file=sys.stderr, flush=True)

    results = measure(
        args.model,
        batches=args.batch,
        rounds=args.rounds,
        threads=args.threads,
        candidates=args.candidates,
        context=args.context,
        prefill_tokens=args.prefill,
        work=args.work,
        genai_python=args.genai_python,
        say=say,
    )
    report = results.to_json()
    report["command"] = shlex.join([sys.executable, *sys.argv])
    report["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    machine = results.machine
    print(
        f"CPU: {machine.get('model_name')} (family {machine.get('family')} model {machine.get('model_number')}), "
        + ", ".join(f"{flag} {'yes' if on else 'no'}" for flag, on in dict(machine.get("flags") or {}).items())
    )
    print(f"context {results.context} tokens, prefill {results.prefill_tokens}, {results.rounds} rounds; medians")
    print(table(results))
    for threads, load in results.load.items():
        print(f"threads {threads}: CPUs busy with other work during the rounds {load.get('cpus_busy_others')}")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
