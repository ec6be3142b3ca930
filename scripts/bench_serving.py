#!/usr/bin/env python3
"""Serving benchmark: server and gateway overhead, micro-batching QPS and its ceiling.

    .venv/bin/python scripts/bench_serving.py [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.serving`.
"""

import sys

from sagebox.bench.serving import main

if __name__ == "__main__":
    sys.exit(main())
