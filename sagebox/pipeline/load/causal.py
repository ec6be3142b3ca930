"""A causal LM (a decoder LLM) and its tokenizer, loaded with transformers from a Hugging Face folder (a Hub snapshot
is one) or a GGUF file, with what serving it takes beyond the weights: EOS and BOS ids, context length, chat template.

In: a path `detect_task` reads as text-generation (hf_task.py: a `*ForCausalLM` folder of a model type the serving
engine runs, or a `*.gguf` file). Out: `CausalLM`, the float32 model in eval mode and its fast tokenizer. A GGUF file
is read by transformers itself (`from_pretrained(folder, gguf_file=name)`, with the `gguf` package): its weights are
dequantized to float32 and its tokenizer is rebuilt from the vocabulary and merges the file holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from neuron_emu.llm.config import DecoderConfig
from sagebox.errors import SageboxError
from sagebox.pipeline.load.hf_model import _first_line, _quiet_transformers
from sagebox.pipeline.load.hf_task import TaskInfo, decoder_shape, detect_task
from sagebox.pipeline.load.sources import is_gguf_file


@dataclass(frozen=True)
class CausalLM:
    """A decoder LLM ready to export: the transformers model, its tokenizer and what the manifest records."""

    model: Any  # a transformers *ForCausalLM: float32, eval mode
    tokenizer: Any  # its fast tokenizer (`backend_tokenizer` is the tokenizers.Tokenizer the server loads)
    shape: DecoderConfig  # the serving engine's reading of the model's config
    eos_token_ids: tuple[int, ...]  # generation ends at any of them (the tokenizer's own EOS first, when listed)
    bos_token_id: int | None
    chat_template: str | None  # Jinja source; None when the tokenizer has none (the Messages API is then refused)
    path: Path  # the folder or GGUF file it was loaded from

    @property
    def architecture(self) -> str:
        """config.json's model_type (llama, mistral, qwen2, gpt2, opt)."""
        return self.shape.model_type

    @property
    def context_length(self) -> int:
        """Prompt plus generated tokens, at most: the position embeddings (Mistral: the sliding window)."""
        return self.shape.max_positions

    def encode(self, text: str) -> list[int]:
        """Token ids of `text` as transformers tokenizes a prompt (with the tokenizer's special tokens)."""
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])


def token_ids(value: object) -> tuple[int, ...]:
    """A config's token id field (an int, a list of ints or None) as a tuple, duplicates dropped in order."""
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(dict.fromkeys(int(v) for v in value))
    return ()


def load_causal_lm(path: Path, info: TaskInfo | None = None) -> CausalLM:
    """The folder's or GGUF file's causal LM and tokenizer; every failure is one SageboxError line."""
    info = info or detect_task(path, "text-generation")
    if info.task != "text-generation":
        raise SageboxError(f"{path} holds a {info.task} model ({info.architecture}), not a causal LM")
    gguf = is_gguf_file(info.model_dir)
    folder = info.model_dir.parent if gguf else info.model_dir
    extra: dict[str, Any] = {"gguf_file": info.model_dir.name} if gguf else {}
    model = _model(folder, extra, path)
    tokenizer = _tokenizer(folder, extra, path)
    if not model.config.architectures:  # a GGUF's config names none: the class transformers chose
        model.config.architectures = [type(model).__name__]
    shape = decoder_shape(model.config.to_dict(), str(path))
    generation = getattr(model, "generation_config", None)
    eos = (
        token_ids(getattr(generation, "eos_token_id", None))
        or token_ids(getattr(model.config, "eos_token_id", None))
        or token_ids(tokenizer.eos_token_id)
    )
    if not eos:
        raise SageboxError(f"{path} records no EOS token id (generation_config.json, config.json or the tokenizer)")
    own = tokenizer.eos_token_id
    if own in eos:  # a chat template's eos_token is the tokenizer's: the server names the first id so
        eos = (own, *(i for i in eos if i != own))
    bos = next(
        iter(
            token_ids(tokenizer.bos_token_id)
            or token_ids(getattr(generation, "bos_token_id", None))
            or token_ids(getattr(model.config, "bos_token_id", None))
        ),
        None,
    )
    return CausalLM(model, tokenizer, shape, eos, bos, chat_template(tokenizer), path)


def chat_template(tokenizer: Any) -> str | None:
    """The tokenizer's chat template: its only one, or the one named "default" when it keeps several."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default")
    return template if isinstance(template, str) and template.strip() else None


def _model(folder: Path, extra: dict[str, Any], path: Path) -> Any:
    """The float32 model in eval mode. A GGUF's quantized blocks are unpacked into plain float32 weights (transformers
    would otherwise keep them packed behind its GGUF matmul kernels, under other module types)."""
    from transformers import AutoModelForCausalLM, GgufConfig

    _quiet_transformers()
    quantization = {"quantization_config": GgufConfig(dequantize=True)} if "gguf_file" in extra else {}
    auto: Any = AutoModelForCausalLM
    try:
        model, loading = auto.from_pretrained(
            str(folder),
            dtype=torch.float32,
            local_files_only=True,
            attn_implementation="eager",
            output_loading_info=True,
            **extra,
            **quantization,
        )
    except Exception as exc:  # transformers, safetensors, gguf and torch each raise their own types for a bad file
        raise SageboxError(f"cannot load the causal LM in {path}: {_first_line(exc)}") from None
    missing = sorted(loading.get("missing_keys", []))
    if missing:
        raise SageboxError(
            f"{path}'s weights lack {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}: transformers would "
            "start them from random weights"
        )
    return model.eval()


def _tokenizer(folder: Path, extra: dict[str, Any], path: Path) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, **extra)
    except Exception as exc:  # a missing or unreadable tokenizer file, a missing converter dependency
        raise SageboxError(f"cannot load the tokenizer of {path}: {_first_line(exc)}") from None
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        raise SageboxError(f"{path}'s tokenizer is not a fast one (tokenizers): the server reads a tokenizer.json")
    return tokenizer
