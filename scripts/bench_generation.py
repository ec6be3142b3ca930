#!/usr/bin/env python3
"""Text-generation benchmark: streamed TTFT, inter-token latency and tokens/s at 1, 4 and 16 streams on the real
server, transformers' generate() beside it, $ per million output tokens, and an optional overload scenario.

    .venv/bin/python scripts/bench_generation.py [--model DIR|GGUF] [--overload] [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.generation`.
"""

import sys

from sagebox.bench.generation import main

if __name__ == "__main__":
    sys.exit(main())
