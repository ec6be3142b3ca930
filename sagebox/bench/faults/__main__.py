"""`python -m sagebox.bench.faults`: the fault benchmark, as `python -m` ran the single module this package
replaces (scripts/bench_faults.py is the usual way)."""

from __future__ import annotations

import sys

from sagebox.bench.faults.cli import main

sys.exit(main())
