"""The FP32 text-generation model directory: what the manifest vouches for, and that the serving engine, loading it,
generates transformers' greedy tokens (from a folder of every family, and from a GGUF file); a directory that would
not compute transformers' logits is never swapped in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer

from container.generation.decoder import KVCache
from container.generation.engine import Engine, new_job
from container.generation.events import Outcome
from container.generation.model import GenerationModel, load_generation_model
from container.generation.request import Message, Sampling
from container.generation.sampling import Sampler
from container.manifest import load_verified
from neuron_emu.llm.config import read_config
from sagebox.errors import SageboxError
from sagebox.pipeline.export import generation
from sagebox.pipeline.export.generation import build_generation
from sagebox.pipeline.export.servable import ModelSource
from sagebox.pipeline.load.causal import load_causal_lm
from tests.causal_models import CHAT_TEMPLATE, causal_folder, tiny_tokenizer, write_llama_gguf
from tests.container.generation.tiny_decoders import tiny_decoder

KINDS = ("llama", "qwen2", "gpt2", "opt", "opt-proj", "opt-post")
PROMPTS = ("the cat sat on", "hello world, this", "rivers carry sand to the sea")
NEW_TOKENS = 10


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("generation")


def engine_greedy(model: GenerationModel, prompt: list[int], max_new: int) -> list[int]:
    """Greedy tokens from the serving engine (one cache slot, prompts prefilled in chunks of 4), EOS not stopping."""
    engine = Engine(model.decoder, KVCache(model.config, 1, 64), lambda: 0.0, model.special_ids, prefill_chunk=4)
    done: list[Outcome] = []
    job = new_job(
        prompt, Sampler(Sampling()), max_new, (), False, model.decode, lambda _: None, done.append, frozenset()
    )
    engine.submit(job)
    while not done:
        engine.step()
    return [token.id for token in done[0].tokens]


def transformers_greedy(model: Any, prompt: list[int], max_new: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=max_new,
            do_sample=False,
            eos_token_id=None,
        )
    return list(out[0, len(prompt) :].tolist())


@pytest.mark.parametrize("kind", KINDS)
def test_a_folder_builds_a_directory_the_engine_generates_transformers_tokens_from(root: Path, kind: str) -> None:
    folder = causal_folder(root / f"hf-{kind}", kind)
    manifest = build_generation(folder, root / f"fp32-{kind}")
    model_dir = root / f"fp32-{kind}"
    assert load_verified(model_dir) == manifest
    served = load_generation_model(model_dir, manifest)
    reference = tiny_decoder(kind)
    tokenizer = AutoTokenizer.from_pretrained(folder)  # transformers' own (for qwen2, Qwen2Tokenizer's pre-tokenizer)
    for text in PROMPTS:
        prompt = served.encode(text, add_special_tokens=True)
        assert prompt == tokenizer(text)["input_ids"]
        assert engine_greedy(served, prompt, NEW_TOKENS) == transformers_greedy(reference, prompt, NEW_TOKENS)


def test_the_manifest_records_the_generation_fields_and_every_file(root: Path) -> None:
    folder = causal_folder(root / "hf-manifest", "llama")
    (folder / "README.md").write_text("---\nlicense: mit\n---\n")
    manifest = build_generation(folder, root / "fp32-manifest")
    assert (manifest.task, manifest.variant, manifest.runtime) == ("text-generation", "fp32", "torch")
    assert (manifest.model_file, manifest.tokenizer.file, manifest.tokenizer.max_length) == (
        "model.safetensors", "tokenizer.json", 256,
    )  # fmt: skip
    assert manifest.sequence_buckets == [256]
    assert sorted(manifest.files) == ["chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json"]
    spec = manifest.generation
    assert spec is not None
    assert (spec.architecture, spec.config_file, spec.context_length) == ("llama", "config.json", 256)
    assert (spec.eos_token_ids, spec.bos_token_id, spec.chat_template, spec.add_special_tokens) == (
        [2], 1, "chat_template.jinja", True,
    )  # fmt: skip
    source = manifest.source
    assert (source.name, source.architecture, source.license, source.origin, source.revision) == (
        "hf-manifest", "LlamaForCausalLM", "mit", "folder", None,
    )  # fmt: skip
    assert (manifest.labels, manifest.problem_type, manifest.pooling, manifest.quantization) == (None,) * 4


def test_config_round_trips_and_tied_heads_are_stored_once(root: Path) -> None:
    from safetensors import safe_open

    for kind, tied in (("llama", False), ("qwen2", True), ("gpt2", True)):
        model_dir = root / f"fp32-{kind}"
        if not model_dir.exists():
            build_generation(causal_folder(root / f"hf-{kind}", kind), model_dir)
        raw = json.loads((model_dir / "config.json").read_text())
        assert read_config(raw) == read_config(tiny_decoder(kind).config.to_dict())
        with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights:
            names = set(weights.keys())
            assert all(weights.get_tensor(name).dtype == torch.float32 for name in names)
        expected = {name for name in tiny_decoder(kind).state_dict() if not (tied and name == "lm_head.weight")}
        assert names == expected


def test_the_chat_template_renders_as_transformers_renders_it(root: Path) -> None:
    model_dir = root / "fp32-llama"
    if not model_dir.exists():
        build_generation(causal_folder(root / "hf-llama", "llama"), model_dir)
    manifest = load_verified(model_dir)
    assert (model_dir / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    served = load_generation_model(model_dir, manifest)
    assert served.chat is not None
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    ours = served.chat.render([Message(m["role"], m["content"]) for m in messages])
    theirs = AutoTokenizer.from_pretrained(root / "hf-llama").apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert ours == theirs == "<s>user: hello</s>\nassistant: hi</s>\nassistant:"


def test_without_a_chat_template_there_is_no_file(root: Path) -> None:
    manifest = build_generation(causal_folder(root / "hf-plain", "opt", chat_template=None), root / "fp32-plain")
    assert manifest.generation is not None and manifest.generation.chat_template is None
    assert "chat_template.jinja" not in manifest.files and not (root / "fp32-plain" / "chat_template.jinja").exists()


def test_a_gguf_file_builds_a_directory_equal_to_its_transformers_model(root: Path, tmp_path: Path) -> None:
    gguf = write_llama_gguf(tmp_path / "tiny.gguf", tiny_decoder("llama"), tiny_tokenizer(), half=True)
    source = ModelSource.resolve(str(gguf))
    manifest = build_generation(gguf, root / "fp32-gguf", source=source)
    assert (manifest.source.name, manifest.source.architecture) == ("tiny.gguf", "LlamaForCausalLM")
    assert manifest.generation is not None and manifest.generation.chat_template == "chat_template.jinja"
    served = load_generation_model(root / "fp32-gguf", manifest)
    reference = load_causal_lm(gguf)
    for text in PROMPTS:
        prompt = reference.encode(text)
        assert served.encode(text, add_special_tokens=True) == prompt
        assert engine_greedy(served, prompt, NEW_TOKENS) == transformers_greedy(reference.model, prompt, NEW_TOKENS)


def test_a_directory_that_misses_transformers_logits_is_never_swapped_in(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = causal_folder(root / "hf-broken", "llama")
    out = tmp_path / "fp32"
    out.mkdir()
    (out / "previous.txt").write_text("the last good build")
    original = generation.safetensors_state

    def off_by_a_little(model: Any, tied: bool) -> dict[str, torch.Tensor]:
        state = original(model, tied)
        state["model.norm.weight"] = state["model.norm.weight"] * 1.01
        return state

    monkeypatch.setattr(generation, "safetensors_state", off_by_a_little)
    with pytest.raises(SageboxError) as error:
        build_generation(folder, out)
    message = str(error.value)
    assert "\n" not in message and "does not compute transformers' logits" in message
    assert [p.name for p in out.iterdir()] == ["previous.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["fp32"]  # no staging folder left behind


def test_an_unsupported_decoder_is_refused_before_anything_is_written(root: Path, tmp_path: Path) -> None:
    folder = causal_folder(tmp_path / "falcon", "llama")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"model_type": "falcon"}))
    with pytest.raises(SageboxError, match="model_type 'falcon' is not a supported decoder"):
        build_generation(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()
