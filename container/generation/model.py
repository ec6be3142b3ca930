"""A text-generation model directory loaded for the engine: its shape, weights, tokenizer and chat template.

The directory is what `sagebox build --task text-generation` writes and its manifest vouches for (container/
manifest.py, GenerationSpec): transformers' config.json, the weights as safetensors under transformers' names, the
tokenizer.json and, where the model has one, its chat template. An FP32 artifact runs on FP32 linear layers, an INT8
artifact (int8 weights, per-channel scales: quantized.py) on INT8 kernels (linear.py). A directory compiled for
NeuronCores (`sagebox compile --model-dir`) holds the compiled decoder in place of the weights
(container/generation/neuron.py).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from container.generation.chat import ChatTemplate
from container.generation.decoder import Decoder
from container.generation.neuron import CompiledShape, NeuronSteps, load_compiled, shape_of
from container.manifest import GenerationSpec, Manifest, ManifestError
from neuron_emu.llm.config import DecoderConfig, read_config


@dataclass
class GenerationModel:
    manifest: Manifest
    config: DecoderConfig
    # The engine's model step: the CPU decoder, or a decoder compiled for NeuronCores (container/generation/neuron.py).
    decoder: Decoder | NeuronSteps
    tokenizer: object  # tokenizers.Tokenizer
    chat: ChatTemplate | None
    special_ids: frozenset[int]
    eos_ids: frozenset[int]
    # A compiled decoder's fixed shapes (None on the CPU engine).
    compiled: CompiledShape | None = None

    @property
    def neuron(self) -> bool:
        return self.compiled is not None

    def close(self) -> None:
        """Stop what the model started (a compiled decoder's tensor-parallel workers)."""
        if isinstance(self.decoder, NeuronSteps):
            self.decoder.close()

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
    """The model of a text-generation directory: FP32 weights for the CPU decoder (runtime torch), or a decoder
    compiled for NeuronCores (runtime neuron: its directory is the one `model_file` sits in)."""
    spec = _spec(manifest)
    config = read_config(json.loads((model_dir / spec.config_file).read_text(encoding="utf-8")))
    config = dataclasses.replace(config, eos_token_ids=tuple(spec.eos_token_ids), bos_token_id=_bos(spec, config))
    decoder: Decoder | NeuronSteps
    compiled: CompiledShape | None = None
    if manifest.runtime == "neuron":
        decoder, compiled = _load_compiled(model_dir, manifest)
    else:
        from safetensors.torch import load_file

        weights = load_file(str(model_dir / manifest.model_file))
        # An INT8 artifact's weights (int8 with per-channel scales) run on the INT8 kernels (linear.py).
        decoder = Decoder(config, weights, linear="int8" if manifest.variant == "int8" else "fp32")
        del weights
    try:
        return _with_tokenizer(model_dir, manifest, spec, config, decoder, compiled)
    except BaseException:
        if isinstance(decoder, NeuronSteps):
            decoder.close()
        raise


def _load_compiled(model_dir: Path, manifest: Manifest) -> tuple[NeuronSteps, CompiledShape]:
    compile_spec = manifest.compile
    if compile_spec is None:
        raise ManifestError("a neuron text-generation manifest must record how it was compiled (the compile section)")
    decoder_dir = PurePosixPath(manifest.model_file).parent.as_posix()
    compiled = load_compiled(model_dir, decoder_dir, compile_spec.backend, compile_spec.tensor_parallel)
    steps = NeuronSteps(compiled)
    try:
        shape = shape_of(compiled, compile_spec.auto_cast, compile_spec.auto_cast_type)
        recorded = (compile_spec.tensor_parallel, compile_spec.batch_size, manifest.tokenizer.max_length)
        loaded = (shape.tensor_parallel, shape.batch_size, shape.max_length)
        if recorded != loaded or list(shape.buckets) != manifest.sequence_buckets:
            raise ManifestError(
                f"the compiled decoder (tensor parallel {loaded[0]}, batch {loaded[1]}, max length {loaded[2]}, "
                f"buckets {list(shape.buckets)}) is not what the manifest records (tensor parallel {recorded[0]}, "
                f"batch {recorded[1]}, max length {recorded[2]}, buckets {manifest.sequence_buckets})"
            )
    except BaseException:
        steps.close()
        raise
    return steps, shape


def _with_tokenizer(
    model_dir: Path,
    manifest: Manifest,
    spec: GenerationSpec,
    config: DecoderConfig,
    decoder: Decoder | NeuronSteps,
    compiled: CompiledShape | None,
) -> GenerationModel:
    from tokenizers import Tokenizer

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
        compiled,
    )
