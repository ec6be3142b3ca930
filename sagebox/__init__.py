"""Sagebox: PyTorch QA models on SageMaker endpoints, cheaply and safely.

Subpackages: `cli` (the `sagebox` command), `pipeline` (build, quantize, compile, package, evaluate), `images`
(the serving image through the Docker API), `box` (SageMaker in a box), `bench` (benchmarks and reports);
`notebook` is the notebook-facing API. Every user-facing failure raises `sagebox.errors.SageboxError`.
"""

__version__ = "0.1.0"
