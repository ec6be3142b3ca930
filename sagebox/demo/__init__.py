"""The demo's kitchen: how `make demo`'s models are made, apart from the pipeline that builds users' models.

`models` holds the recipes (random BERT-base dimensions for speed work; all-MiniLM-L6-v2 fine-tuned for extractive
QA), cached under SAGEBOX_CACHE_DIR; `finetune` trains a QA head on the CPU; its data is the hand-written corpus
(`qa_corpus`, files under `corpus/`) and generated SQuAD-style paragraphs (`synth_squad` over the relations of
`synth_relations` and the word lists of `synth_values`, `synth_clauses` for generic clauses). The demo models then go
through `sagebox.pipeline` like any user's model; nothing under `sagebox.pipeline` imports this package.
"""
