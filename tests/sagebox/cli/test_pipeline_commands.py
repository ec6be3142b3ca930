from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from sagebox.cli.app import main
from sagebox.cli.quantize import EXIT_GATE_FAILED
from sagebox.pipeline.data.squad import load_squad
from sagebox.pipeline.gate.evaluate import evaluate_model_dir
from tests.sagebox.conftest import TINY_MODEL_MAX_F1_DROP


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("sagebox:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def _quantize(model: Path, out: Path, eval_path: Path, *extra: str) -> int:
    return main(["quantize", "--model", str(model), "--out", str(out), "--eval", str(eval_path), *extra])


def test_quantize_passes_and_prints_the_table(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tolerance = str(TINY_MODEL_MAX_F1_DROP)
    code = _quantize(
        outlier_hf_folder, tmp_path / "out", self_consistent_json, "--threads", "1", "--max-f1-drop", tolerance
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "accuracy gate passed" in out
    assert "FP32" in out and "INT8" in out
    assert (tmp_path / "out" / "int8" / "manifest.json").is_file()


def test_quantize_gate_failure_exits_3_with_one_line(
    outlier_hf_folder: Path, self_consistent_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _quantize(outlier_hf_folder, tmp_path / "out", self_consistent_json, "--per-tensor", "--json")
    captured = capsys.readouterr()
    assert code == EXIT_GATE_FAILED
    assert "accuracy gate FAILED" in _one_error_line(captured.err)
    assert json.loads(captured.out)["gate"]["passed"] is False
    assert not (tmp_path / "out" / "int8").exists()


@pytest.mark.parametrize("problem", ["missing", "wrong-architecture", "no-tokenizer", "bad-eval", "empty-calibration"])
def test_bad_input_is_one_line_and_nonzero(
    problem: str, tiny_hf_folder: Path, dev_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, eval_path, extra = tmp_path / "model", dev_json, []
    shutil.copytree(tiny_hf_folder, model)
    if problem == "missing":
        shutil.rmtree(model)
    elif problem == "wrong-architecture":
        config = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps(config | {"model_type": "t5"}))
    elif problem == "no-tokenizer":
        (model / "tokenizer.json").unlink()
    elif problem == "bad-eval":
        eval_path = tmp_path / "eval.json"
        eval_path.write_text('{"data": [{"paragraphs": [{"qas": []}]}]}')
    else:
        calibration = tmp_path / "calibration.json"
        calibration.write_text(json.dumps({"data": []}))
        extra = ["--mode", "static", "--calibration", str(calibration)]
    code = _quantize(model, tmp_path / "out", eval_path, *extra)
    assert code == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("sagebox: error: ")
    assert not (tmp_path / "out").exists()


def test_evaluate_json_matches_the_library(
    tiny_onnx_model_dir: Path, dev_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    predictions = tmp_path / "predictions.json"
    code = main(
        [
            "evaluate",
            "--model-dir",
            str(tiny_onnx_model_dir),
            "--data",
            str(dev_json),
            "--json",
            "--predictions",
            str(predictions),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    expected = evaluate_model_dir(tiny_onnx_model_dir, load_squad(dev_json))
    assert printed["exact_match"] == pytest.approx(expected.score.exact_match)
    assert printed["f1"] == pytest.approx(expected.score.f1)
    assert printed["total"] == 24
    assert json.loads(predictions.read_text()) == expected.predictions


def test_evaluate_missing_dir(dev_json: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", "--model-dir", str(tmp_path / "nope"), "--data", str(dev_json)]) == 1
    assert "does not exist" in _one_error_line(capsys.readouterr().err)


def test_package_command(tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "model.tar.gz"
    assert main(["package", "--model-dir", str(tiny_model_dir), "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(out)
    assert printed["runtime"] == "torchscript"
    with tarfile.open(out) as tar:
        assert sorted(tar.getnames()) == printed["members"]
    assert main(["package", "--model-dir", str(tmp_path), "--out", str(out)]) == 1
    assert "manifest.json" in _one_error_line(capsys.readouterr().err)


def test_upload_command_against_a_moto_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from moto.server import ThreadedMotoServer

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        endpoint = f"http://localhost:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        s3.create_bucket(Bucket="models")
        artifact = tmp_path / "model.tar.gz"
        artifact.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 64)
        code = main(
            [
                "upload",
                "--artifact",
                str(artifact),
                "--bucket",
                "models",
                "--key",
                "qa/model.tar.gz",
                "--endpoint-url",
                endpoint,
                "--verify-download",
                "--json",
            ]
        )
        assert code == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["uri"] == "s3://models/qa/model.tar.gz"
        assert s3.get_object(Bucket="models", Key="qa/model.tar.gz")["Body"].read() == artifact.read_bytes()
        code = main(
            [
                "upload",
                "--artifact",
                str(artifact),
                "--bucket",
                "missing-bucket",
                "--key",
                "k",
                "--endpoint-url",
                endpoint,
            ]
        )
        assert code == 1
        assert "NoSuchBucket" in _one_error_line(capsys.readouterr().err)
    finally:
        server.stop()
