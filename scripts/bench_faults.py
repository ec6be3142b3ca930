#!/usr/bin/env python3
"""Fault benchmark: overload at 4x capacity, SIGTERM and kill -9 under load, the box's embedded AWS killed.

    .venv/bin/python scripts/bench_faults.py [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.faults`.
"""

import sys

from sagebox.bench.faults import main

if __name__ == "__main__":
    sys.exit(main())
