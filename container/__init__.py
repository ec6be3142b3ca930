"""The Sagebox serving container: SageMaker's BYOC contract (`serve`, /ping, /invocations) for the encoder tasks
(container/tasks/: extractive QA, text and token classification, embeddings) on ONNX Runtime, TorchScript or
NeuronCore graphs (container/handlers/)."""

__version__ = "0.1.0"
