"""Stage 1, load. In: a Hugging Face model folder or a Hub id (`org/name[@revision]`). Out: the local folder
(`sources`), what it is for, its task, labels and pooling (`hf_task`), and the model as a module with one fixed call
signature per task that every later stage exports, quantizes or compiles (`hf_model`); a decoder LLM (a folder or a
GGUF file) as transformers' causal LM with its tokenizer, EOS ids and chat template (`causal`). A new model family's
loader goes here."""
