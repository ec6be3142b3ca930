"""Load a Hugging Face style model folder as an extractive-QA module with one fixed call signature."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from sagebox.errors import SageboxError

# Encoder families whose QA heads return (start_logits, end_logits) and whose tokenizers Sagebox reads.
SUPPORTED_MODEL_TYPES = ("bert", "distilbert", "roberta", "xlm-roberta", "electra", "albert", "mobilebert")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class QAModule(nn.Module):
    """(input_ids, attention_mask, token_type_ids) -> (start_logits, end_logits): what every artifact runs."""

    def __init__(self, model: nn.Module, uses_token_types: bool) -> None:
        super().__init__()
        self.model = model
        self.uses_token_types = uses_token_types

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.uses_token_types:
            kwargs["token_type_ids"] = token_type_ids
        out = self.model(**kwargs, return_dict=False)
        return out[0], out[1]


def check_model_folder(model_dir: Path) -> dict[str, object]:
    """The folder's config.json, after checking the files a QA export needs are there."""
    if not model_dir.is_dir():
        raise SageboxError(f"model folder {model_dir} does not exist")
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise SageboxError(f"{model_dir} has no config.json: not a Hugging Face model folder")
    try:
        config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SageboxError(f"{config_path} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise SageboxError(f"{config_path} must hold a JSON object")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise SageboxError(
            f"unsupported architecture {model_type!r} in {config_path}: Sagebox exports "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} encoders for extractive QA"
        )
    if not (model_dir / "tokenizer.json").is_file():
        raise SageboxError(f"{model_dir} has no tokenizer.json (a fast tokenizer file is required)")
    if not any((model_dir / name).is_file() for name in WEIGHT_FILES):
        raise SageboxError(f"{model_dir} has no weights ({' or '.join(WEIGHT_FILES)})")
    return config


def load_qa_module(model_dir: Path, attn_implementation: str = "eager") -> QAModule:
    """Load the folder's weights into a QA model in eval mode; a missing QA head starts from random init."""
    config = check_model_folder(model_dir)
    from transformers import AutoConfig, AutoModelForQuestionAnswering
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        hf_config = AutoConfig.from_pretrained(str(model_dir), local_files_only=True)
        model = AutoModelForQuestionAnswering.from_pretrained(
            str(model_dir), config=hf_config, local_files_only=True, attn_implementation=attn_implementation
        )
    except Exception as exc:  # transformers, safetensors and torch each raise their own types for a bad folder
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SageboxError(f"cannot load the model in {model_dir}: {first}") from None
    uses_token_types = int(str(config.get("type_vocab_size") or 0)) > 1
    return QAModule(model, uses_token_types).eval()
