"""Compile a text-generation model directory for NeuronCores, as NxD Inference compiles a decoder LLM, into a servable
neuron text-generation directory: written atomically, and checked against the CPU engine before it is swapped in.

In: what `sagebox build --task text-generation` writes (config.json, FP32 safetensors, tokenizer.json, chat template,
its manifest). Out: the same tokenizer, config and chat template, the compiled decoder (DECODER_DIR, as
`neuron_emu.llm` saves it: a context-encoding and a token-generation graph per sequence bucket, the batch lines fixed
at compile, sharded over `tensor_parallel` NeuronCores) and a manifest with variant and runtime "neuron", the compile
section (backend, auto-cast, tensor parallel, batch size, target instances) and the compiled buckets.

The check loads the staged directory as the server does and runs a probe prompt through both graphs (context
encoding, then one token-generation step) beside the FP32 CPU engine: with `auto_cast` none the logits must agree
within FP32_ATOL + FP32_RTOL x |logit|; with bf16 auto-cast they differ by what bf16 rounding costs, which is measured
and reported, not gated.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from container.manifest import CompileSpec, GenerationSpec, Manifest, ManifestError, load_verified
from sagebox.errors import SageboxError
from sagebox.pipeline.export.artifact import staged_dir, write_manifest

Backend = Literal["neuron_emu", "torch_neuronx"]
DECODER_DIR = "decoder"
# A compiled decoder's default max length (prompt plus generated tokens): the CPU engine's default MAX_TOTAL_TOKENS.
DEFAULT_MAX_LENGTH = 2048
FP32_ATOL = 1e-3
FP32_RTOL = 1e-3
PROBE_TEXT = "Sagebox compiles decoders: the quick brown fox jumps over the lazy dog, then 42 more words."
NXDI_UNSUPPORTED = (
    "--backend torch-neuronx does not compile text-generation models here: real NeuronCores need NxD Inference "
    "(neuronx_distributed_inference), which Sagebox does not drive yet; compile with --backend neuron-emu (emulated, "
    "for the local box) or with NxD Inference itself on a Neuron host"
)


@dataclass(frozen=True)
class DecoderCompile:
    """How to compile a decoder: the shapes fixed at compile and the numerics."""

    tensor_parallel: int = 1
    batch_size: int = 1
    max_length: int | None = None  # None: the model's context, at most DEFAULT_MAX_LENGTH
    auto_cast: str = "matmult"
    auto_cast_type: str = "bf16"
    target: str | None = None  # "inf2" / "trn1": the instance family whose degrees the compile allows
    buckets: tuple[int, ...] | None = None  # None: neuron_emu.llm's default buckets up to max_length


@dataclass(frozen=True)
class ProbeCheck:
    """How far the compiled decoder's logits were from the CPU engine's on the probe prompt."""

    prompt_tokens: int
    context_difference: float  # context encoding: the last prompt token's logits
    token_difference: float  # one token-generation step after it
    same_next_token: bool  # both greedy choices agree, at both steps


def read_generation_dir(model_dir: Path) -> Manifest:
    """The verified manifest of an FP32 text-generation directory, or one line saying why it is not one."""
    try:
        manifest = load_verified(Path(model_dir))
    except ManifestError as exc:
        raise SageboxError(f"--model-dir: {exc}") from None
    if manifest.task != "text-generation" or manifest.runtime != "torch" or manifest.generation is None:
        raise SageboxError(
            f"--model-dir {model_dir} holds a {manifest.task} model on the {manifest.runtime} runtime; give the FP32 "
            "text-generation directory `sagebox build --task text-generation` writes (its work folder's fp32/)"
        )
    if manifest.variant != "fp32":
        # NeuronCores run the weights in bf16 (or fp32): compiling INT8 weights would carry their rounding error into
        # a model whose own numerics do not need it.
        raise SageboxError(
            f"--model-dir {model_dir} holds the {manifest.variant} variant; compile the FP32 text-generation directory "
            "(its work folder's fp32/)"
        )
    return manifest


def default_max_length(manifest: Manifest) -> int:
    assert manifest.generation is not None
    return min(manifest.generation.context_length, DEFAULT_MAX_LENGTH)


def compile_generation(
    model_dir: Path,
    out_dir: Path,
    options: DecoderCompile = DecoderCompile(),
    *,
    backend: Backend = "neuron_emu",
    say: Callable[[str], None] = lambda _: None,
) -> tuple[Manifest, ProbeCheck]:
    """The neuron text-generation directory of `model_dir` (an FP32 text-generation directory) at `out_dir`."""
    if backend != "neuron_emu":
        raise SageboxError(NXDI_UNSUPPORTED)
    source = read_generation_dir(model_dir)
    spec = source.generation
    assert spec is not None
    max_length = options.max_length or default_max_length(source)
    if max_length > spec.context_length:
        raise SageboxError(f"--max-length {max_length} exceeds the model's context of {spec.context_length} tokens")
    if options.auto_cast not in ("none", "matmult"):
        raise SageboxError(f"--auto-cast {options.auto_cast}: a decoder compiles with none or matmult")
    config = json.loads((model_dir / spec.config_file).read_text(encoding="utf-8"))
    weights = _weights(model_dir, source)
    compiled = _compile(config, weights, options, max_length, say)
    with staged_dir(out_dir) as staging:
        compiled.save(staging / DECODER_DIR)
        for name in {source.tokenizer.file, spec.config_file, *([spec.chat_template] if spec.chat_template else [])}:
            shutil.copyfile(model_dir / name, staging / name)
        manifest = write_manifest(
            staging,
            variant="neuron",
            runtime="neuron",
            model_file=decoder_model_file(staging),
            buckets=list(compiled.buckets),
            max_length=max_length,
            source=source.source,
            compile_spec=compile_spec(compiled, options, config),
            task="text-generation",
            generation=GenerationSpec(**{**spec.model_dump(), "context_length": max_length}),
        )
        check = verify(staging, manifest, model_dir, source, weights, options.auto_cast == "none")
        say(
            f"checked against the CPU engine on a {check.prompt_tokens}-token prompt: largest logit difference "
            f"{check.context_difference:.3g} (context encoding), {check.token_difference:.3g} (token generation); "
            f"greedy next tokens {'agree' if check.same_next_token else 'differ'}"
        )
    return manifest, check


def _weights(model_dir: Path, manifest: Manifest) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(model_dir / manifest.model_file))


def _compile(
    config: dict[str, Any],
    weights: dict[str, torch.Tensor],
    options: DecoderCompile,
    max_length: int,
    say: Callable[[str], None],
) -> Any:
    from neuron_emu.errors import NeuronEmuError
    from neuron_emu.llm.compile import compile_decoder

    say(
        f"compiling the decoder for NeuronCores (neuron_emu): tensor parallel {options.tensor_parallel}, batch "
        f"{options.batch_size}, max length {max_length}, auto-cast {options.auto_cast}"
    )
    try:
        return compile_decoder(
            config,
            weights,
            tp_degree=options.tensor_parallel,
            batch_size=options.batch_size,
            max_length=max_length,
            buckets=list(options.buckets) if options.buckets else None,
            auto_cast=options.auto_cast,
            auto_cast_type=options.auto_cast_type,
            instance_family=options.target,
        )
    except NeuronEmuError as exc:
        raise SageboxError(f"Neuron compilation of the decoder failed: {' '.join(str(exc).split())}") from None


def decoder_model_file(model_dir: Path) -> str:
    """The file the manifest names as the model: the compiled decoder's description (neuron_emu.llm's decoder.json)."""
    from neuron_emu.llm.artifact import MANIFEST

    name = f"{DECODER_DIR}/{MANIFEST}"
    if not (model_dir / name).is_file():
        raise SageboxError(f"the compiled decoder in {model_dir / DECODER_DIR} has no {MANIFEST}")
    return name


def compile_spec(compiled: Any, options: DecoderCompile, config: dict[str, Any]) -> CompileSpec:
    from neuron_emu import __version__ as emu_version
    from neuron_emu.hardware import target_instances
    from neuron_emu.llm.config import read_config

    shape = read_config(config)
    return CompileSpec(
        backend="neuron_emu",
        compiler=(
            f"neuron_emu {emu_version} (emulating NxD Inference: context encoding and token generation per sequence "
            f"bucket, tensor parallel over {compiled.tp_degree} NeuronCore(s))"
        ),
        auto_cast=options.auto_cast,
        auto_cast_type=options.auto_cast_type,
        target_instances=list(target_instances(options.target)),
        tensor_parallel=int(compiled.tp_degree),
        num_attention_heads=shape.heads,
        batch_size=int(compiled.batch_size),
    )


def probe_ids(model_dir: Path, manifest: Manifest, longest: int) -> list[int]:
    from container.generation.model import load_prompt_side

    tokenizer, _ = load_prompt_side(model_dir, manifest)
    spec = manifest.generation
    assert spec is not None
    ids = list(tokenizer.encode(PROBE_TEXT, add_special_tokens=spec.add_special_tokens).ids)[:longest]
    if not ids:
        raise SageboxError(f"the tokenizer of {model_dir} gives no tokens for a probe prompt")
    return ids


def verify(
    staged: Path,
    manifest: Manifest,
    source_dir: Path,
    source: Manifest,
    weights: dict[str, torch.Tensor],
    exact: bool,
) -> ProbeCheck:
    """Load `staged` as the server does; its context encoding and one token-generation step must give the CPU
    engine's logits (within FP32 tolerance when `exact`, else the difference is only measured)."""
    from container.generation.decoder import Decoder, KVCache, Segment
    from container.generation.model import load_generation_model
    from container.generation.neuron import NeuronSteps

    model = load_generation_model(staged, manifest)
    try:
        assert isinstance(model.decoder, NeuronSteps)
        longest = min(max(manifest.sequence_buckets), manifest.tokenizer.max_length - 1)
        ids = probe_ids(staged, manifest, longest)
        steps = model.decoder
        compiled_first = steps.forward(torch.tensor(ids), [Segment(0, 0, len(ids))], steps)[0].float()
        chosen = int(compiled_first.argmax())
        compiled_next = steps.forward(torch.tensor([chosen]), [Segment(0, len(ids), 1)], steps)[0].float()
    finally:
        model.close()
    cpu = Decoder(model.config, weights)
    cache = KVCache(model.config, 1, len(ids) + 1)
    cpu_first = cpu.forward(torch.tensor(ids), [Segment(0, 0, len(ids))], cache)[0]
    cpu_next = cpu.forward(torch.tensor([chosen]), [Segment(0, len(ids), 1)], cache)[0]
    check = ProbeCheck(
        len(ids),
        _difference(compiled_first, cpu_first),
        _difference(compiled_next, cpu_next),
        chosen == int(cpu_first.argmax()) and int(compiled_next.argmax()) == int(cpu_next.argmax()),
    )
    if exact:
        _check_close("context encoding", compiled_first, cpu_first, source_dir)
        _check_close("token generation", compiled_next, cpu_next, source_dir)
    elif not (torch.isfinite(compiled_first).all() and torch.isfinite(compiled_next).all()):
        raise SageboxError(f"the compiled decoder of {source_dir} gives non-finite logits on a probe prompt")
    return check


def _difference(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).abs().max())


def _check_close(name: str, got: torch.Tensor, want: torch.Tensor, where: Path) -> None:
    difference = (got - want).abs()
    allowed = FP32_ATOL + FP32_RTOL * want.abs()
    if got.shape != want.shape or bool((difference > allowed).any()):
        raise SageboxError(
            f"the decoder compiled from {where} with auto-cast none does not compute the CPU engine's logits "
            f"({name}): largest difference {float(difference.max()):.3g} (allowed {FP32_ATOL:g} + {FP32_RTOL:g} x "
            "|logit|)"
        )
