from __future__ import annotations

import json
from pathlib import Path

import pytest

from sagebox.cli.app import main
from tests.infra.model_tarballs import write_model_dir

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:1"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("models"))


def test_check_prints_each_target_with_its_cost(model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "infra",
            "check",
            "--model-dir",
            str(model_dir),
            "--image-uri",
            IMAGE,
            "--only",
            "c6i-int8,trn1-neuron",
            "--allow-emulated",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "c6i-int8: sagebox-c6i-int8 on ml.c6i.2xlarge, int8, $0.41-0.82/h" in out
    assert "trn1-neuron: sagebox-trn1-neuron on ml.trn1.2xlarge, neuron, $1.78-3.56/h" in out
    assert "KMS-encrypted volume, data capture 10 %" in out
    assert "instance-store NVMe" in out and "c5-fp32" not in out
    assert out.rstrip().splitlines()[-1].startswith("2 target(s) OK; prices: ")


def test_check_reads_another_price_table(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "source": "mine",
                "region": "eu-west-1",
                "currency": "USD",
                "as_of": "today",
                "per_hour": {"ml.c5.2xlarge": 1.0},
            }
        )
    )
    args = ["infra", "check", "--model-dir", str(model_dir), "--image-uri", IMAGE, "--prices", str(prices)]
    code = main([*args, "--allow-emulated"])
    out = capsys.readouterr().out
    assert code == 0 and "ml.c5.2xlarge, fp32, $1.00-2.00/h" in out and "ml.inf2.xlarge, neuron, no price" in out


def test_check_reports_a_misplaced_artifact_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    targets = tmp_path / "targets.json"
    targets.write_text(
        json.dumps(
            {
                "targets": [
                    {
                        "name": "bad",
                        "instance_type": "ml.inf2.xlarge",
                        "variant": "int8",
                        "model_data": "s3://models-bucket/int8/model.tar.gz",
                        "image": IMAGE,
                    }
                ]
            }
        )
    )
    assert main(["infra", "check", "--targets", str(targets)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sagebox: error: target 'bad': 'int8' is a CPU artifact") and err.count("\n") == 1


@pytest.mark.slow
def test_synth_writes_every_stack(model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "infra",
            "synth",
            "--image-uri",
            IMAGE,
            "--outdir",
            str(tmp_path),
            "--model-data",
            "c5-fp32=s3://models-bucket/fp32/model.tar.gz",
            "--only",
            "c5-fp32",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "sagebox-artifacts: " in out and "sagebox-c5-fp32: " in out
    assert "synthesized 2 stacks into" in out
    assert sorted(p.name for p in tmp_path.glob("*.template.json")) == [
        "sagebox-artifacts.template.json",
        "sagebox-c5-fp32.template.json",
    ]


def test_check_refuses_an_emulated_neuron_model_unless_allowed(
    model_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SAGEBOX_ALLOW_EMULATED", raising=False)
    args = ["infra", "check", "--model-dir", str(model_dir), "--image-uri", IMAGE, "--only", "inf2-neuron"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "allow_emulated" in err and "torch-neuronx" in err
    assert main([*args, "--allow-emulated"]) == 0
