"""Decoder LLMs (Llama/Mistral/Qwen2, GPT-2, OPT) for NeuronCores: their shape read from a Hugging Face config
(`config`), compiled the way NxD Inference does it and run on emulated NeuronCores, sized and priced per token."""
