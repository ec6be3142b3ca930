"""The FP32 text-generation model directory: a causal LM (load/causal.py) in, what the serving engine loads
(container/generation/model.py) out, written atomically and checked before it is swapped in.

The directory holds transformers' config.json, the float32 weights as model.safetensors under transformers' names
(a tied lm_head is left out: it is the embedding matrix, which the engine reuses), the fast tokenizer's tokenizer.json,
the chat template as chat_template.jinja when the tokenizer has one, and the manifest (GenerationSpec: model type,
context length, EOS and BOS ids, chat template file). The check loads the staged directory as the server does: its
tokenizer must give transformers' ids for a probe prompt, and its decoder transformers' logits at every position of
it, within LOGITS_ATOL + LOGITS_RTOL * |logit| (the FP32 gate: an FP32 build has nothing else to lose).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from container.manifest import GenerationSpec, Manifest
from neuron_emu.llm.config import read_config
from sagebox.errors import SageboxError
from sagebox.pipeline.export.artifact import staged_dir, write_manifest
from sagebox.pipeline.export.servable import ModelSource, source_spec
from sagebox.pipeline.load.causal import CausalLM, load_causal_lm
from sagebox.pipeline.load.hf_task import TaskInfo, detect_task

MODEL_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# Letters, digits, punctuation and a non-ASCII word: enough to cover a tokenizer's pre-tokenizer and normalizer paths.
PROBE_TEXT = "Sagebox serves models: 12 tokens, then 345 more! Ça marche? The quick brown fox jumps over the lazy dog."
LOGITS_ATOL = 1e-4
LOGITS_RTOL = 1e-4


@dataclass(frozen=True)
class Probe:
    """A prompt's token ids and transformers' logits at each of its positions: what the built directory must match."""

    ids: list[int]
    logits: torch.Tensor  # [len(ids), vocab]


def probe(lm: CausalLM, text: str = PROBE_TEXT) -> Probe:
    """transformers' token ids for `text` (cut to the context) and its model's logits at every position."""
    ids = lm.encode(text)[: lm.context_length]
    if not ids:
        raise SageboxError(f"the tokenizer of {lm.path} gives no tokens for a probe prompt")
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return Probe(ids, logits.logits[0].float())


def safetensors_state(model: Any, tied: bool) -> dict[str, torch.Tensor]:
    """The model's state dict as float32, contiguous tensors that share no storage (safetensors refuses shared ones):
    a tied `lm_head.weight` is dropped, any other shared tensor is copied."""
    state: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and tied:
            continue
        value = tensor.detach().to(torch.float32).contiguous()
        storage = value.untyped_storage().data_ptr()
        if storage in seen:
            value = value.clone()
        seen.add(value.untyped_storage().data_ptr())
        state[name] = value
    return state


def generation_spec(lm: CausalLM, chat_file: str | None) -> GenerationSpec:
    return GenerationSpec(
        architecture=lm.architecture,
        config_file=CONFIG_FILE,
        context_length=lm.context_length,
        eos_token_ids=list(lm.eos_token_ids),
        bos_token_id=lm.bos_token_id,
        chat_template=chat_file,
        add_special_tokens=True,
    )


def write_files(lm: CausalLM, folder: Path) -> str | None:
    """config.json, model.safetensors, tokenizer.json and (when there is one) chat_template.jinja into `folder`; the
    chat template's file name, or None."""
    from safetensors.torch import save_file
    from tokenizers import Tokenizer

    config = json.loads(lm.model.config.to_json_string(use_diff=False))
    if read_config(config) != lm.shape:
        raise SageboxError(f"config.json of {lm.path} does not read back as the model it describes")
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    save_file(safetensors_state(lm.model, lm.shape.tie_embeddings), str(folder / MODEL_FILE), metadata={"format": "pt"})
    # A copy without padding or truncation: the server tokenizes a prompt whole, as transformers does.
    tokenizer = Tokenizer.from_str(lm.tokenizer.backend_tokenizer.to_str())
    tokenizer.no_padding()
    tokenizer.no_truncation()
    tokenizer.save(str(folder / TOKENIZER_FILE))
    if lm.chat_template is None:
        return None
    (folder / CHAT_TEMPLATE_FILE).write_text(lm.chat_template, encoding="utf-8")
    return CHAT_TEMPLATE_FILE


def verify(model_dir: Path, manifest: Manifest, expected: Probe, where: Path) -> float:
    """Load `model_dir` as the server does; its tokenizer must give the probe's ids and its decoder the probe's logits.
    Returns the largest logit difference."""
    from container.generation.decoder import Decoder, KVCache, Segment
    from container.generation.model import load_generation_model

    model = load_generation_model(model_dir, manifest)
    assert isinstance(model.decoder, Decoder)  # an FP32 directory: the CPU engine's decoder
    text_ids = model.encode(PROBE_TEXT, manifest.generation.add_special_tokens if manifest.generation else True)
    if text_ids[: len(expected.ids)] != expected.ids:
        raise SageboxError(
            f"the tokenizer.json written for {where} tokenizes differently from transformers' tokenizer "
            f"({text_ids[:8]}... against {expected.ids[:8]}...): the server would read other prompts"
        )
    n = len(expected.ids)
    logits = model.decoder.forward(
        torch.tensor(expected.ids), [Segment(0, 0, n)], KVCache(model.config, 1, n), logits_rows=torch.arange(n)
    )
    difference = (logits - expected.logits).abs()
    allowed = LOGITS_ATOL + LOGITS_RTOL * expected.logits.abs()
    if logits.shape != expected.logits.shape or bool((difference > allowed).any()):
        raise SageboxError(
            f"the built model of {where} does not compute transformers' logits: largest difference "
            f"{float(difference.max()):.3g} (allowed {LOGITS_ATOL:g} + {LOGITS_RTOL:g} x |logit|)"
        )
    return float(difference.max())


def build_generation(
    model: Path,
    out_dir: Path,
    *,
    info: TaskInfo | None = None,
    source: ModelSource | None = None,
    lm: CausalLM | None = None,
) -> Manifest:
    """The FP32 text-generation model directory of `model` (a causal LM folder or a GGUF file) at `out_dir`, verified
    against transformers before it replaces anything there. Returns its manifest."""
    info = info or detect_task(model, "text-generation")
    lm = lm or load_causal_lm(model, info)
    expected = probe(lm)
    spec = source_spec(info, source or ModelSource(model))
    with staged_dir(out_dir) as staging:
        chat_file = write_files(lm, staging)
        manifest = write_manifest(
            staging,
            variant="fp32",
            runtime="torch",
            model_file=MODEL_FILE,
            buckets=[lm.context_length],
            max_length=lm.context_length,
            source=spec,
            task="text-generation",
            generation=generation_spec(lm, chat_file),
        )
        del lm  # the transformers weights are not needed to check the directory
        verify(staging, manifest, expected, model)
    return manifest
