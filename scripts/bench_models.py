#!/usr/bin/env python3
"""Model benchmark: FP32 vs INT8 latency at BERT-base dims, artifact sizes, MiniLM EM/F1.

    .venv/bin/python scripts/bench_models.py [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.models`.
"""

import sys

from sagebox.bench.models import main

if __name__ == "__main__":
    sys.exit(main())
