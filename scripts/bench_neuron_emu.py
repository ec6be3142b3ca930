#!/usr/bin/env python3
"""neuron_emu custom ops: call overhead against the native torch op, and warm library load.

    .venv/bin/python scripts/bench_neuron_emu.py [--help]

A thin wrapper: the benchmark lives in `sagebox.bench.neuron_emu_ops`.
"""

import sys

from sagebox.bench.neuron_emu_ops import main

if __name__ == "__main__":
    sys.exit(main())
