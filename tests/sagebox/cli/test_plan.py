"""`sagebox plan CONFIG`: the table and its JSON, configs from a file, a folder or the Hub (config.json alone), and one
line with exit 1 for every bad input."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from sagebox.cli.app import EXIT_USER_ERROR, main
from tests.hub_standin import HubStandIn

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / "infra" / "examples" / "llm_configs"
HF_VARIABLES = ("HF_HOME", "HF_HUB_CACHE", "HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

ROW_KEYS = {
    "instance_type", "tp", "replicas", "fits", "reason", "padded", "hbm_gib_per_core", "gib_per_core", "ttft_ms",
    "ms_per_token", "tokens_per_s_b1", "max_batch", "tokens_per_s_max_batch", "usd_per_hour", "usd_per_m_tokens_b1",
    "usd_per_m_tokens_max_batch",
}  # fmt: skip
CPU_KEYS = (ROW_KEYS - {"tp", "replicas", "padded", "hbm_gib_per_core", "gib_per_core"}) | {
    "vcpus",
    "memory_gib",
    "gib_needed",
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_table_lists_every_size_and_degree_with_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["plan", str(CONFIGS / "opt-66b.json"), "--dtype", "fp16"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert "ESTIMATE" in lines[1]
    tp8 = next(line for line in lines if line.startswith("ml.inf2.48xlarge    8 "))
    assert "no: 16." in tp8 and "GiB/core (weights 15." in tp8
    tp24 = next(line for line in lines if line.startswith("ml.inf2.48xlarge   24 "))
    assert tp24.endswith("  yes")
    assert any(line.startswith("ml.trn1.32xlarge   16 ") and "72 heads not divisible by 16" in line for line in lines)
    assert any(line.startswith("ml.c6i.2xlarge") and "FP32 weights" in line for line in lines)
    assert lines[-1].startswith("prices: ")


def test_a_folder_and_its_config_give_the_same_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(CONFIGS / "llama-2-13b.json", tmp_path / "config.json")
    code, from_folder, _ = run(["plan", str(tmp_path), "--json"], capsys)
    assert code == 0
    code, from_file, _ = run(["plan", str(tmp_path / "config.json"), "--json"], capsys)
    assert code == 0
    assert json.loads(from_folder)["neuron"] == json.loads(from_file)["neuron"]


def test_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["plan", str(CONFIGS / "llama-2-13b.json"), "--json", "--seq-len", "1024"], capsys)
    assert code == 0
    plan = json.loads(out)
    assert plan["estimate"] is True
    assert plan["sequence"] == 1024 and plan["prompt"] + plan["output"] == 1024 and plan["dtype"] == "bf16"
    assert {"model", "neuron", "cpu", "constants", "assumptions", "prices", "config", "pad_heads"} <= set(plan)
    assert plan["model"]["parameters"] > 13e9 and plan["model"]["kv_heads"] == 40
    assert {"source", "region", "as_of", "currency"} == set(plan["prices"])
    assert plan["constants"]["fitted_to"] and plan["assumptions"]
    for row in plan["neuron"]:
        assert set(row) == ROW_KEYS
        assert row["fits"] == (row["ttft_ms"] is not None) == (row["max_batch"] is not None)
        assert row["fits"] or row["reason"]
    for row in plan["cpu"]:
        assert set(row) == CPU_KEYS
    priced = [r for r in plan["neuron"] if r["fits"] and r["usd_per_hour"]]
    assert priced and all(r["usd_per_m_tokens_b1"] > 0 for r in priced)


def test_pad_heads_projects_degrees_nxd_refuses_marked_padded(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["plan", str(CONFIGS / "llama-2-13b.json"), "--json"], capsys)
    [strict] = [r for r in json.loads(out)["neuron"] if r["instance_type"] == "ml.inf2.48xlarge" and r["tp"] == 24]
    assert not strict["fits"] and strict["reason"] == "40 heads not divisible by 24"
    _, out, _ = run(["plan", str(CONFIGS / "llama-2-13b.json"), "--json", "--pad-heads"], capsys)
    [padded] = [r for r in json.loads(out)["neuron"] if r["instance_type"] == "ml.inf2.48xlarge" and r["tp"] == 24]
    assert padded["fits"] and padded["padded"] and padded["reason"].startswith("padded: ")


def test_another_price_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    table = {"source": "mine", "region": "r", "currency": "USD", "as_of": "now", "per_hour": {"ml.inf2.48xlarge": 2.0}}
    prices.write_text(json.dumps(table))
    code, out, _ = run(["plan", str(CONFIGS / "opt-30b.json"), "--json", "--prices", str(prices)], capsys)
    assert code == 0
    rows = json.loads(out)["neuron"]
    assert all((r["usd_per_hour"] == 2.0) == (r["instance_type"] == "ml.inf2.48xlarge") for r in rows)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["missing.json"], "config file missing.json does not exist"),
        (["not a model id!"], "is neither a config.json, a folder holding one, nor a Hub id"),
        (["{bad}", "--seq-len", "1"], "--seq-len must be at least 2"),
        (["{opt}", "--seq-len", "4096"], "sequence length 4096 exceeds the model's 2048 positions"),
        (["{bert}"], "model_type 'bert' is not a supported decoder"),
        (["{bad}"], "is not valid JSON"),
        (["{empty_dir}"], "holds no config.json"),
        (["{opt}", "--prices", "{bad}"], "is not valid JSON"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "bert.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    (tmp_path / "empty").mkdir()
    names = {
        "bad": tmp_path / "bad.json",
        "bert": tmp_path / "bert.json",
        "empty_dir": tmp_path / "empty",
        "opt": CONFIGS / "opt-30b.json",
    }
    code, out, err = run(["plan", *(a.format(**names) for a in argv)], capsys)
    assert code == EXIT_USER_ERROR
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("sagebox: error: ")
    assert message in err


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    """A Hub stand-in serving a model folder (config.json beside weights), and a fresh Hugging Face home."""
    from huggingface_hub import constants

    for name in HF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    folder = tmp_path / "repo"
    folder.mkdir()
    shutil.copy(CONFIGS / "llama-2-13b.json", folder / "config.json")
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    weights_only = tmp_path / "weights-only"
    weights_only.mkdir()
    (weights_only / "model.safetensors").write_bytes(b"\0" * 4096)
    with HubStandIn() as server:
        server.add_repo("meta-llama/Llama-2-13b-hf", {"main": folder})
        server.add_repo("org/weights-only", {"main": weights_only})
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_a_hub_id_downloads_config_json_alone(hub: HubStandIn, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["plan", "meta-llama/Llama-2-13b-hf", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["model"]["layers"] == 40
    assert "reading config.json of meta-llama/Llama-2-13b-hf" in err
    fetched = [path for method, path, _ in hub.requests if method == "GET" and "/resolve/" in path]
    assert fetched and all(path.endswith("/config.json") for path in fetched)


def test_a_hub_id_missing_or_offline_is_one_line(
    hub: HubStandIn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["plan", "nobody/nothing"], capsys)
    assert code == EXIT_USER_ERROR and len(err.strip().splitlines()) == 2  # the "reading" note, then the error
    assert err.splitlines()[-1].startswith("sagebox: error: nobody/nothing is neither a local folder nor a model")
    code, _, err = run(["plan", "org/weights-only"], capsys)
    assert code == EXIT_USER_ERROR
    assert err.splitlines()[-1] == "sagebox: error: org/weights-only has no config.json: not a transformers model"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run(["plan", "meta-llama/Llama-2-13b-hf"], capsys)
    assert code == EXIT_USER_ERROR
    assert "not in the Hugging Face cache" in err.splitlines()[-1] and "HF_HUB_OFFLINE is set" in err
