"""A text-generation model directory loaded for the engine: its shape, weights, tokenizer and chat template.

The directory is what `sagebox build --task text-generation` writes and its manifest vouches for (container/
manifest.py, GenerationSpec): transformers' config.json, the weights as safetensors under transformers' names, the
tokenizer.json and, where the model has one, its chat template. Weights are read into float32 (FP32 artifacts; INT8
and int4 weights are issue 39's).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from container.generation.chat import ChatTemplate
from container.generation.decoder import Decoder
from container.manifest import GenerationSpec, Manifest
from neuron_emu.llm.config import DecoderConfig, read_config


@dataclass
class GenerationModel:
    manifest: Manifest
    config: DecoderConfig
    decoder: Decoder
    tokenizer: object  # tokenizers.Tokenizer
    chat: ChatTemplate | None
    special_ids: frozenset[int]
    eos_ids: frozenset[int]

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)  # type: ignore[attr-defined]

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))  # type: ignore[attr-defined]


def _chat(model_dir: Path, spec: GenerationSpec, tokenizer: Any, bos_token_id: int | None) -> ChatTemplate | None:
    """The directory's chat template, given bos_token/eos_token as text (the ids the manifest and config name), as
    transformers passes a tokenizer's special tokens to it; None when the model has none."""
    if spec.chat_template is None:
        return None
    names: dict[str, str] = {}
    for name, token_id in (("bos_token", bos_token_id), ("eos_token", next(iter(spec.eos_token_ids), None))):
        text = tokenizer.id_to_token(token_id) if token_id is not None else None
        if text is not None:
            names[name] = text
    return ChatTemplate((model_dir / spec.chat_template).read_text(encoding="utf-8"), names)


def _bos(spec: GenerationSpec, config: DecoderConfig) -> int | None:
    return spec.bos_token_id if spec.bos_token_id is not None else config.bos_token_id


def load_prompt_side(model_dir: Path, manifest: Manifest) -> tuple[Any, ChatTemplate | None]:
    """The tokenizer and chat template alone, as the server makes prompts (no weights read): for tools that need
    the server's prompt ids."""
    from tokenizers import Tokenizer

    spec = _spec(manifest)
    config = read_config(json.loads((model_dir / spec.config_file).read_text(encoding="utf-8")))
    tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer.file))
    return tokenizer, _chat(model_dir, spec, tokenizer, _bos(spec, config))


def _spec(manifest: Manifest) -> GenerationSpec:
    if manifest.generation is None:
        raise ValueError("not a text-generation manifest")
    return manifest.generation


def load_generation_model(model_dir: Path, manifest: Manifest) -> GenerationModel:
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    spec = _spec(manifest)
    config = read_config(json.loads((model_dir / spec.config_file).read_text(encoding="utf-8")))
    config = dataclasses.replace(config, eos_token_ids=tuple(spec.eos_token_ids), bos_token_id=_bos(spec, config))
    weights = load_file(str(model_dir / manifest.model_file))
    decoder = Decoder(config, weights)
    del weights
    tokenizer = Tokenizer.from_file(str(model_dir / manifest.tokenizer.file))
    special = frozenset(i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special)
    chat = _chat(model_dir, spec, tokenizer, config.bos_token_id)
    return GenerationModel(
        manifest,
        config,
        decoder,
        tokenizer,
        chat,
        special | frozenset(spec.eos_token_ids),
        frozenset(spec.eos_token_ids),
    )
