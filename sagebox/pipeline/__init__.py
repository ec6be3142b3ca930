"""The build pipeline: a Hugging Face encoder (a folder or a Hub id) in, SageMaker model artifacts out.

Four encoder tasks go through it: extractive question answering, text classification, token classification and
sentence embeddings; and text generation (a decoder LLM from a folder, a Hub id or a GGUF file: FP32 and INT8
directories for the serving engine, INT8 gated on its perplexity and greedy agreement with FP32; Neuron from the FP32
directory by `sagebox compile`). Its stages are subpackages, listed in the order a build runs; each may import the
stages above it and none below (tests/test_layering.py):

    load/      a folder or Hub id        -> the model's task (TaskInfo) and a module with one call signature
    data/      the user's data files      -> labelled examples, calibration texts (built-in ones when none given)
    export/    a task module              -> an FP32 servable model directory (graph, tokenizer, manifest), atomically
    quantize/  FP32 graph + calibration   -> an INT8 candidate model directory
    gate/      FP32 and INT8 directories  -> each task's accuracy verdict: is INT8 kept?
    compile/   a Hugging Face folder      -> a NeuronCore (Inferentia2/Trainium) model directory
    package/   a model directory          -> a reproducible model.tar.gz, uploaded to S3 with checksums

On top, the orchestration: `quantize_flow` (FP32 + gated INT8, `sagebox quantize`), `generation_flow` (a decoder
LLM's FP32 + gated INT8) and `build_all` (every artifact of one model, `sagebox build`). A new model family's loader
goes in `load/`; the INT8 gate is decided in `gate/` (`task_gate` holds the checks and limits, `task_eval` the
per-task judges; `generation_gate` a decoder LLM's). The demo model's training (recipe, fine-tuning, generated and
hand-written QA data) is not here: it lives in `sagebox.demo`, which nothing in the pipeline imports.
"""
