#!/usr/bin/env python3
"""Stream a text-generation endpoint's answer token by token (InvokeEndpointWithResponseStream).

Local box (after `sagebox up` with an LLM target):  .venv/bin/python scripts/invoke-stream.py c6i-llm "Tell me a joke"
Real account:  .venv/bin/python scripts/invoke-stream.py NAME "PROMPT" --region us-east-1 --profile P [--max-tokens N]
"""

import sys

from sagebox.cli.invoke import stream_script_main

if __name__ == "__main__":
    sys.exit(stream_script_main())
