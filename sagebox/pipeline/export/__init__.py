"""Stage 3, export. In: a loaded task module (load/). Out: an FP32 servable model directory (TorchScript or ONNX
graph with dynamic batch and sequence, the tokenizer, the manifest) that the serving container loads. `graph` exports,
`servable` assembles the directory, `artifact` writes every model directory of the pipeline atomically (staged,
hashed, swapped in)."""
