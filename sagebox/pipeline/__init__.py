"""The model pipeline: load a Hugging Face QA model, export FP32, quantize INT8, evaluate, package."""
