"""Sagebox: PyTorch models on SageMaker endpoints, cheaply and safely.

Today it builds, serves and deploys encoders for four tasks (extractive question answering, text classification,
token classification, sentence embeddings), as FP32, gated INT8 and NeuronCore artifacts; decoder LLMs are next.
Subpackages: `cli` (the `sagebox` command), `pipeline` (a user's model in, artifacts out: load, data, export,
quantize, gate, compile, package), `demo` (how the demo's models are made; the pipeline never imports it), `images`
(the serving image through the Docker API), `box` (SageMaker in a box), `bench` (benchmarks and reports);
`notebook` is the notebook-facing API. Every user-facing failure raises `sagebox.errors.SageboxError`.
"""

__version__ = "0.1.0"
