"""Stage 3, export. In: a loaded task module (load/). Out: an FP32 servable model directory (TorchScript or ONNX
graph with dynamic batch and sequence, the tokenizer, the manifest) that the serving container loads. `graph` exports,
`servable` assembles the directory, `generation` writes a decoder LLM's directory for the generation engine (config,
safetensors weights, tokenizer, chat template; checked against transformers' logits), `artifact` writes every model
directory of the pipeline atomically (staged, hashed, swapped in)."""
