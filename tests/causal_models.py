"""Tiny causal LM sources for the text-generation build: Hugging Face folders (tests/container/generation's seeded
random decoders, saved by transformers, with a tiny BPE tokenizer trained here) and a GGUF file of the Llama one
written with the gguf package as llama.cpp's converter lays it out (its tensor names, its permuted query/key rows).
Everything is deterministic: the decoders are seeded, the tokenizer is trained on fixed sentences."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.container.generation.tiny_decoders import VOCAB, tiny_decoder

SENTENCES = (
    "the cat sat on the mat.",
    "a dog ran in the park, and the cat slept in the sun.",
    "hello world, this is a tiny model that writes short answers!",
    "rivers carry sand to the sea; farmers plant seeds in spring.",
)
SPECIALS = ("<pad>", "<s>", "</s>", "<unk>")  # ids 0-3: tiny_decoder's pad, BOS and EOS ids
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


def tiny_tokenizer(chat_template: str | None = CHAT_TEMPLATE) -> Any:
    """A fast BPE tokenizer (sentencepiece-style spaces, BOS prepended) of at most VOCAB tokens."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIALS), show_progress=False)
    tokenizer.train_from_iterator(SENTENCES, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    assert tokenizer.get_vocab_size() <= VOCAB
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    return fast


def causal_folder(folder: Path, kind: str = "llama", chat_template: str | None = CHAT_TEMPLATE) -> Path:
    """`folder` holding tiny_decoder(kind) and the tiny tokenizer, as save_pretrained writes them."""
    from transformers.utils import logging

    logging.disable_progress_bar()
    tiny_decoder(kind).save_pretrained(folder)
    tiny_tokenizer(chat_template).save_pretrained(folder)
    return folder


def _permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf reorders query/key rows per head (interleaved rotary halves)."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_llama_gguf(path: Path, model: Any, tokenizer: Any, half: bool = False) -> Path:
    """`model` (a LlamaForCausalLM) and `tokenizer` as a GGUF file at `path`: llama architecture metadata, the BPE
    vocabulary and merges as a "llama" (sentencepiece-style) tokenizer, matrices in float16 when `half`."""
    import gguf

    config = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(config.hidden_size // config.num_attention_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if half else gguf.LlamaFileType.ALL_F32)
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = backend["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    tokens += [f"<unused{i}>" for i in range(len(tokens), config.vocab_size)]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * len(tokens))
    # 3: control (the special tokens), 2: unknown, 1: normal.
    writer.add_token_types([3 if i < 3 else 2 if i == 3 else 1 for i in range(len(tokens))])
    writer.add_token_merges([" ".join(m) if isinstance(m, list) else m for m in backend["model"]["merges"]])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(3)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        weights = tensor.detach().numpy().astype(np.float32)
        base, suffix = name.rsplit(".", 1)
        if name.endswith("q_proj.weight"):
            weights = _permute(weights, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            weights = _permute(weights, config.num_key_value_heads)
        if half and weights.ndim == 2:
            weights = weights.astype(np.float16)
        writer.add_tensor(f"{names.get_name(base)}.{suffix}", weights)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
