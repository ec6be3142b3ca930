"""A text-generation model directory as the server loads it, written here from a tiny random model and a tiny
character tokenizer (no pipeline involved): config.json, model.safetensors, tokenizer.json, chat_template.jinja and
the manifest that vouches for them."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from container.manifest import GenerationSpec, Manifest, SourceSpec, TokenizerSpec, hash_files
from tests.container.generation.tiny_decoders import VOCAB, tiny_decoder

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
# Enough of the printable characters to fill the tiny models' vocabulary, "▁" standing for a space.
CHARACTERS = ["▁", *string.ascii_lowercase, *string.ascii_uppercase, *string.digits, *".,?!'-:;()"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<' + message['role'] + '>' + message['content'] + '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<assistant>' }}{% endif %}"
)


def character_tokenizer() -> Tokenizer:
    vocab = {token: index for index, token in enumerate([*SPECIALS, *CHARACTERS][:VOCAB])}
    tokenizer = Tokenizer(models.BPE(vocab, [], unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="never")
    tokenizer.add_special_tokens(SPECIALS)
    return tokenizer


def write_model_dir(out: Path, kind: str = "llama", seed: int = 0, chat: bool = True, context: int = 256) -> Path:
    model: Any = tiny_decoder(kind, seed, context)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(model.config.to_dict()))
    weights = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    save_file(weights, str(out / "model.safetensors"))
    character_tokenizer().save(str(out / "tokenizer.json"))
    if chat:
        (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    context = int(getattr(model.config, "max_position_embeddings", 0) or model.config.n_positions)
    manifest = Manifest(
        tool_version="test",
        task="text-generation",
        variant="fp32",
        runtime="torch",
        model_file="model.safetensors",
        tokenizer=TokenizerSpec(file="tokenizer.json", max_length=context),
        sequence_buckets=[context],
        source=SourceSpec(name=f"tiny-{kind}", architecture=type(model).__name__),
        generation=GenerationSpec(
            architecture=model.config.model_type,
            context_length=context,
            eos_token_ids=[2],
            bos_token_id=1,
            chat_template="chat_template.jinja" if chat else None,
            add_special_tokens=False,
        ),
        files=hash_files(out),
    )
    (out / "manifest.json").write_text(manifest.to_json())
    return out


def reference_tokens(kind: str, prompt_ids: list[int], max_new: int, seed: int = 0) -> list[int]:
    """transformers' own greedy tokens for the same tiny model."""
    model: Any = tiny_decoder(kind, seed)
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt_ids]), max_new_tokens=max_new, do_sample=False, eos_token_id=None,
            attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.int64),
        )  # fmt: skip
    return list(out[0, len(prompt_ids) :].tolist())
