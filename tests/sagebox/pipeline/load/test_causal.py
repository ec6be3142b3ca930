"""Causal LMs in the load stage: a folder, a GGUF file or a Hub id is read as text-generation (only for the model types
the serving engine runs) and loaded with its EOS/BOS ids, context length and chat template."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from sagebox.errors import SageboxError
from sagebox.pipeline.load.causal import load_causal_lm, token_ids
from sagebox.pipeline.load.hf_model import load_task_module
from sagebox.pipeline.load.hf_task import detect_task
from sagebox.pipeline.load.sources import resolve_model
from tests.causal_models import CHAT_TEMPLATE, causal_folder, tiny_tokenizer, write_llama_gguf
from tests.container.generation.tiny_decoders import tiny_decoder
from tests.hub_standin import HubStandIn

ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "opt": "OPTForCausalLM",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("causal")


@pytest.fixture(scope="module")
def llama(root: Path) -> Path:
    return causal_folder(root / "llama", "llama")


def _one_line(error: pytest.ExceptionInfo[SageboxError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("kind", sorted(ARCHITECTURES))
def test_a_causal_lm_folder_is_text_generation_with_its_context(root: Path, kind: str) -> None:
    folder = causal_folder(root / f"detect-{kind}", kind)
    info = detect_task(folder)
    assert (info.task, info.architecture, info.max_length) == ("text-generation", ARCHITECTURES[kind], 256)
    assert (info.labels, info.problem_type, info.pooling, info.model_type) == (None, None, None, kind)
    assert detect_task(folder, "text-generation") == info


def test_the_loaded_model_carries_eos_bos_context_and_chat_template(llama: Path) -> None:
    lm = load_causal_lm(llama)
    assert (lm.architecture, lm.context_length, lm.eos_token_ids, lm.bos_token_id) == ("llama", 256, (2,), 1)
    assert lm.chat_template == CHAT_TEMPLATE
    assert lm.encode("the cat")[0] == 1  # the tokenizer's BOS, as transformers adds it
    assert all(p.dtype == torch.float32 for p in lm.model.parameters()) and not lm.model.training
    reference = tiny_decoder("llama")
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(lm.model.state_dict()[name], tensor, rtol=0, atol=0)


def test_generation_config_eos_ids_win_and_the_tokenizer_eos_comes_first(llama: Path, tmp_path: Path) -> None:
    folder = shutil.copytree(llama, tmp_path / "eos")
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 2, 7], "bos_token_id": 1}))
    assert load_causal_lm(folder).eos_token_ids == (2, 7)
    assert token_ids(None) == () and token_ids(5) == (5,) and token_ids([3, 3, 4]) == (3, 4) and token_ids(True) == ()


def test_no_chat_template_is_none(root: Path) -> None:
    assert load_causal_lm(causal_folder(root / "plain", "gpt2", chat_template=None)).chat_template is None


def test_mistral_context_is_its_sliding_window(tmp_path: Path) -> None:
    import transformers

    torch.manual_seed(0)
    config = transformers.MistralConfig(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, sliding_window=64, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    folder = tmp_path / "mistral"
    transformers.MistralForCausalLM(config).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    assert detect_task(folder).max_length == 64
    assert load_causal_lm(folder).context_length == 64


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"model_type": "falcon", "architectures": ["FalconForCausalLM"]}, "model_type 'falcon' is not a supported"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0}}, "rope type 'yarn'"),
        ({"hidden_act": "gelu"}, "activation 'gelu' is not supported"),
    ],
)
def test_a_decoder_the_engine_cannot_serve_is_one_line(
    llama: Path, tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    folder = shutil.copytree(llama, tmp_path / "unsupported")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | change))
    with pytest.raises(SageboxError) as error:
        detect_task(folder)
    message = _one_line(error)
    assert expected in message and str(folder / "config.json") in message and "cannot serve" in message
    with pytest.raises(SageboxError, match=expected):
        load_causal_lm(folder)


def test_tasks_that_do_not_fit_the_folder_are_one_line(llama: Path, tmp_path: Path) -> None:
    with pytest.raises(SageboxError) as error:
        detect_task(llama, "text-classification")
    assert "LlamaForCausalLM (a decoder LLM)" in _one_line(error) and "text-generation only" in str(error.value)
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps({"architectures": ["BertForQuestionAnswering"]}))
    with pytest.raises(SageboxError) as error:
        detect_task(encoder, "text-generation")
    assert "BertForQuestionAnswering (a question-answering model), not a causal LM" in _one_line(error)
    with pytest.raises(SageboxError) as error:
        load_task_module(detect_task(llama))  # the encoders' export, compile and quantize paths
    assert "sagebox build --task text-generation" in _one_line(error)


def test_a_folder_without_weights_or_config_is_one_line(llama: Path, tmp_path: Path) -> None:
    folder = shutil.copytree(llama, tmp_path / "no-weights")
    (folder / "model.safetensors").unlink()
    with pytest.raises(SageboxError, match="has no weights"):
        detect_task(folder)
    with pytest.raises(SageboxError, match="does not exist"):
        detect_task(tmp_path / "absent", "text-generation")


@pytest.mark.parametrize("half", [False, True])
def test_a_gguf_file_is_a_causal_lm_read_by_transformers(tmp_path: Path, half: bool) -> None:
    model, tokenizer = tiny_decoder("llama"), tiny_tokenizer()
    gguf = write_llama_gguf(tmp_path / "tiny-llama.gguf", model, tokenizer, half=half)
    resolved = resolve_model(str(gguf))
    assert (resolved.path, resolved.name, resolved.origin) == (gguf, "tiny-llama.gguf", "folder")
    info = detect_task(gguf)
    assert (info.task, info.architecture, info.max_length, info.model_dir) == (
        "text-generation", "LlamaForCausalLM", 256, gguf,
    )  # fmt: skip
    lm = load_causal_lm(gguf)
    assert (lm.architecture, lm.eos_token_ids, lm.bos_token_id, lm.chat_template) == ("llama", (2,), 1, CHAT_TEMPLATE)
    assert lm.model.config.architectures == ["LlamaForCausalLM"]
    assert type(lm.model.model.layers[0].self_attn.q_proj) is torch.nn.Linear  # unpacked, not GGUF kernels
    tolerance = 1e-3 if half else 0.0  # float16 matrices, read back into float32
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(lm.model.state_dict()[name], tensor, rtol=tolerance, atol=tolerance)
    assert lm.encode("the cat sat.") == tokenizer("the cat sat.")["input_ids"]
    with pytest.raises(SageboxError, match="text-generation only"):
        detect_task(gguf, "feature-extraction")


def test_a_broken_gguf_file_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(SageboxError) as error:
        detect_task(broken)
    assert f"cannot read the GGUF file {broken}" in _one_line(error)


# Hub ids -------------------------------------------------------------------------------------------------------------

HF_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE", "HF_TOKEN_PATH")


@pytest.fixture
def hub(llama: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    from huggingface_hub import constants

    for name in HF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    repo = shutil.copytree(llama, tmp_path / "repo")
    (repo / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 5], "bos_token_id": 1}))
    (repo / "README.md").write_text("---\nlicense: apache-2.0\n---\n# tiny llama\n")
    (repo / "tiny-llama.Q8_0.gguf").write_bytes(b"GGUF another format")  # not what a folder build reads
    (repo / "original").mkdir()
    (repo / "original" / "consolidated.00.pth").write_bytes(b"Meta's own checkpoint format")
    with HubStandIn() as server:
        server.add_repo("tiny-org/tiny-llama", {"main": repo})
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_a_hub_id_fetches_what_a_causal_lm_needs(hub: HubStandIn) -> None:
    resolved = resolve_model("tiny-org/tiny-llama")
    files = {p.name for p in resolved.path.iterdir()}
    assert files == {
        "config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
        "chat_template.jinja", "README.md",
    }  # fmt: skip
    assert (resolved.origin, resolved.license) == ("hub", "apache-2.0")
    lm = load_causal_lm(resolved.path)
    assert (lm.eos_token_ids, lm.chat_template) == ((2, 5), CHAT_TEMPLATE)
