#!/usr/bin/env python3
"""Ask the INT8 endpoint the reference workflow's questions about the Amazon rainforest; print answers and latency.

Local box (after `sagebox up`):  .venv/bin/python scripts/invoke-INT8.py
Real account:                     .venv/bin/python scripts/invoke-INT8.py --endpoint NAME --region us-east-1 --profile P
"""

import sys

from sagebox.cli.invoke import script_main

if __name__ == "__main__":
    sys.exit(script_main("int8"))
