"""The generation service on a decoder compiled for NeuronCores (`sagebox compile --model-dir`, neuron_emu, FP32):
the CPU engine's text through both payloads, streamed too; a prompt past the compiled length is a 400; LMI/TGI settings
that contradict the compiled shapes stop start-up with one line, and those that agree are accepted."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from container.env import MODEL_DIR, ServerSettings
from container.generation.neuron import NXDI_MISSING, NXDI_NOT_SERVED, NeuronSteps
from container.generation.service import SETTINGS_REASON, GenerationService
from container.manifest import load_verified
from container.privileges import Identity
from container.service import ModelStatus
from sagebox.pipeline.compile.generation import DecoderCompile, compile_generation
from tests.container.generation.model_dir import character_tokenizer, reference_tokens, write_model_dir
from tests.container.generation.test_http import PROMPT, _events, _ids, _service, run, serving

BATCH = 2


@pytest.fixture(scope="module")
def neuron_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("neuron-gen")
    fp32 = write_model_dir(root / "fp32", "llama")
    compile_generation(fp32, root / "neuron", DecoderCompile(batch_size=BATCH, auto_cast="none"))
    return root / "neuron"


def test_the_compiled_decoder_answers_the_cpu_engines_text_whole_and_streamed(neuron_dir: Path) -> None:
    expected = character_tokenizer().decode(reference_tokens("llama", _ids(PROMPT), 10), skip_special_tokens=True)

    async def main() -> None:
        async with serving(_service(neuron_dir)) as client:
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 10}}
            response = await client.post("/invocations", json=body)
            assert response.status_code == 200, response.text
            assert response.json()[0]["generated_text"] == expected
            streamed = await client.post("/invocations", json={**body, "stream": True})
            events = [json.loads(line) for line in _events(streamed.text)]
            assert "".join(e["token"]["text"] for e in events) == expected == events[-1]["generated_text"]
            stats = (await client.get("/stats")).json()
            assert stats["manifest"]["variant"] == "neuron"
            assert stats["generation"]["slots"] == BATCH and stats["generation"]["max_total_tokens"] == 256
            assert stats["generation"]["compiled"] == {
                "tensor_parallel": 1, "batch_size": BATCH, "max_length": 256, "buckets": [128, 256],
                "auto_cast_type": "fp32",
            }  # fmt: skip
            too_long = await client.post("/invocations", json={"inputs": "a" * 300})
            assert too_long.status_code == 400 and "at most 255" in too_long.json()["message"]

    run(main())


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"TENSOR_PARALLEL_DEGREE": "2"}, "TENSOR_PARALLEL_DEGREE 2 contradicts the model, compiled for tensor para"),
        ({"HF_NUM_CORES": "2"}, "HF_NUM_CORES 2 contradicts the model, compiled for tensor parallel 1"),
        ({"OPTION_MAX_ROLLING_BATCH_SIZE": "8"}, "OPTION_MAX_ROLLING_BATCH_SIZE 8 contradicts the model, compiled"),
        ({"MAX_BATCH_SIZE": "1"}, "MAX_BATCH_SIZE 1 contradicts the model, compiled for batch size 2"),
        ({"HF_BATCH_SIZE": "4"}, "HF_BATCH_SIZE 4 contradicts the model, compiled for batch size 2"),
        ({"MAX_TOTAL_TOKENS": "128"}, "MAX_TOTAL_TOKENS 128 contradicts the model, compiled for 256 tokens"),
        ({"OPTION_N_POSITIONS": "512"}, "OPTION_N_POSITIONS 512 contradicts the model, compiled for 256 tokens"),
        ({"MAX_BATCH_TOTAL_TOKENS": "1024"}, "MAX_BATCH_TOTAL_TOKENS 1024 contradicts the model's key/value cache"),
        ({"HF_AUTO_CAST_TYPE": "bf16"}, "HF_AUTO_CAST_TYPE bf16 contradicts the model, compiled with fp32"),
    ],
)
def test_a_setting_that_contradicts_the_compiled_shapes_refuses_the_model_in_one_line(
    neuron_dir: Path, env: dict[str, str], line: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = _service(neuron_dir, **env)
    with caplog.at_level(logging.ERROR, logger="sagebox.server"):
        run(service.start())
    assert service.status is ModelStatus.FAILED and service.reason == SETTINGS_REASON
    [refusal] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model refused:")]
    assert line in refusal and "\n" not in refusal


def test_settings_that_agree_with_the_compiled_shapes_are_accepted(neuron_dir: Path) -> None:
    agreeing = {
        "OPTION_TENSOR_PARALLEL_DEGREE": "1", "HF_NUM_CORES": "1",
        "OPTION_MAX_ROLLING_BATCH_SIZE": str(BATCH), "MAX_BATCH_SIZE": str(BATCH), "MAX_TOTAL_TOKENS": "256",
        "MAX_BATCH_TOTAL_TOKENS": str(BATCH * 256), "HF_AUTO_CAST_TYPE": "float32",
    }  # fmt: skip
    service = _service(neuron_dir, **agreeing)
    run(service.start())
    try:
        assert service.status is ModelStatus.READY, service.reason
    finally:
        run(service.close())


def test_the_manifest_records_the_compiled_decoder(neuron_dir: Path) -> None:
    manifest = load_verified(neuron_dir)
    assert (manifest.task, manifest.variant, manifest.runtime) == ("text-generation", "neuron", "neuron")
    assert manifest.model_file == "decoder/decoder.json" and manifest.sequence_buckets == [128, 256]
    assert manifest.compile is not None and (manifest.compile.batch_size, manifest.compile.auto_cast) == (BATCH, "none")
    assert manifest.generation is not None and manifest.generation.context_length == manifest.tokenizer.max_length


def test_a_decoder_compiled_by_nxd_inference_is_refused_in_one_line(
    neuron_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    nxdi = tmp_path / "nxdi"
    shutil.copytree(neuron_dir, nxdi)
    manifest = json.loads((nxdi / "manifest.json").read_text())
    manifest["compile"]["backend"] = "torch_neuronx"
    (nxdi / "manifest.json").write_text(json.dumps(manifest))

    def refusal() -> str:
        caplog.clear()
        service = _service(nxdi)
        with caplog.at_level(logging.ERROR, logger="sagebox.server"):
            run(service.start())
        assert service.status is ModelStatus.FAILED
        [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model refused:")]
        return line

    assert NXDI_MISSING in refusal()  # this host has no neuronx_distributed_inference
    # A stand-in module named as AWS's (importable, nothing in it): Sagebox does not serve NxD Inference decoders.
    monkeypatch.setitem(sys.modules, "neuronx_distributed_inference", types.ModuleType("neuronx_distributed_inference"))
    assert NXDI_NOT_SERVED in refusal()


def _uids(pid: int) -> list[int]:
    """Real, effective, saved and filesystem uids of a live process, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return [int(v) for v in fields["Uid"].split()]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the server starts as root, as SageMaker runs containers")
def test_a_tensor_parallel_decoder_runs_on_worker_processes_that_follow_the_server_to_its_user(tmp_path: Path) -> None:
    fp32 = write_model_dir(tmp_path / "fp32", "llama")
    compile_generation(fp32, tmp_path / "tp2", DecoderCompile(tensor_parallel=2, batch_size=BATCH, auto_cast="none"))
    expected = character_tokenizer().decode(reference_tokens("llama", _ids(PROMPT), 10), skip_special_tokens=True)
    settings = ServerSettings.from_env({MODEL_DIR: str(tmp_path / "tp2"), "SAGEBOX_INTRA_OP_THREADS": "1"})
    # The server itself stays root here (the test process); what it hands its helpers is what a real drop returns.
    service = GenerationService(
        settings, drop_privileges=lambda user: Identity(10001, 10001, "sagebox", "/"), memory=lambda: 1 << 30
    )
    pids: list[int] = []

    async def main() -> None:
        async with serving(service) as client:
            assert service.model is not None and isinstance(service.model.decoder, NeuronSteps)
            pids.extend(service.model.decoder.decoder.worker_pids)
            assert len(pids) == 2
            assert all(_uids(pid) == [10001] * 4 for pid in pids)  # no way back to root
            body = {"inputs": PROMPT, "parameters": {"max_new_tokens": 10}}
            response = await client.post("/invocations", json=body)
            assert response.status_code == 200, response.text
            assert response.json()[0]["generated_text"] == expected  # gloo all-reduces give the CPU engine's text

    run(main())
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists() and "zombie" not in _state(pid)]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].splitlines()[0]
    except (OSError, IndexError):
        return "zombie"
