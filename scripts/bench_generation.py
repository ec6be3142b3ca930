#!/usr/bin/env python3
"""Text-generation benchmark: streamed TTFT, inter-token latency and tokens/s at 1, 4 and 16 streams on the real
server for each Sagebox model directory given (e.g. a build's fp32 and int8), llama.cpp (llama-cpp-python at one
stream, llama-batched-bench at 1, 4 and 16 sequences; `make peers` builds them) and transformers' generate() beside
them, the ratios between them, $ per million output tokens per variant, and an optional overload scenario.

    .venv/bin/python scripts/bench_generation.py [--model DIR|GGUF ...] [--peer-gguf GGUF] [--overload] [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.generation`.
"""

import sys

from sagebox.bench.generation import main

if __name__ == "__main__":
    sys.exit(main())
