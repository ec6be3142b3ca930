"""SageMaker in a box end to end on a user's own build: `sagebox build`, `sagebox up` (the real CDK CLI into the
embedded AWS), status, env, invoke through boto3, bench, down (twice)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from sagebox.box import processes
from sagebox.box.down import tear_down
from sagebox.box.reconciler import load_fleet
from sagebox.box.runtime_gateway import SEED_ENV
from sagebox.box.state import load_state
from sagebox.box.up import UpOptions, bring_up
from sagebox.errors import SageboxError
from sagebox.paths import REPO
from tests.sagebox.conftest import Built

TARGETS = ("c6i-int8", "c6i-fp32", "inf2-neuron")


@contextlib.contextmanager
def quiet_step(title: str) -> Iterator[Callable[[str], None]]:
    yield lambda line: None


def cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SAGEBOX_STATE_DIR": str(state_dir)}
    return subprocess.run([sys.executable, "-m", "sagebox", *args], cwd=REPO, env=env, capture_output=True, text=True)


@pytest.mark.slow
def test_your_own_build_up_invoke_bench_down(built: Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert built.result.returncode == 0, built.result.stderr
    state_dir = tmp_path / "state"
    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(state_dir))
    monkeypatch.setenv(SEED_ENV, "3")  # the gateway's sampling of invocations for data capture is seeded
    state = None
    try:
        state = bring_up(UpOptions(TARGETS, state_dir=state_dir, models=built.out), quiet_step)
        assert load_state(state_dir) == state and state.models_source == "yours"
        assert state.models_dir == str(built.out.resolve())

        # `sagebox env` points any AWS SDK at the box; the endpoints are the stacks' names, as on AWS.
        env_lines = cli(state_dir, "env").stdout
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in env_lines.splitlines() if line.startswith("export ")
        )
        assert exports["AWS_ENDPOINT_URL"] == state.aws_url and exports["AWS_ACCESS_KEY_ID"] == "testing"
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=exports["AWS_REGION"]
        )
        sagemaker = session.client("sagemaker", endpoint_url=exports["AWS_ENDPOINT_URL"])
        runtime = session.client("sagemaker-runtime", endpoint_url=exports["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"])
        fleet = load_fleet(state_dir)
        for target in TARGETS:
            name = f"sagebox-{target}"
            described = sagemaker.describe_endpoint(EndpointName=name)
            assert described["EndpointStatus"] == "InService"
            config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            [variant] = fleet[name]["variants"]
            # What serves is what was deployed: the stack's model data, fetched from the bootstrap bucket.
            model = sagemaker.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
            assert variant["model_data_url"] == model["PrimaryContainer"]["ModelDataUrl"]
            assert variant["model_data_url"].startswith("s3://cdk-hnb659fds-assets-123456789012-us-east-1/")
            manifest = json.loads((Path(variant["model_dir"]) / "manifest.json").read_text())
            assert manifest["variant"] == target.split("-")[1]
            context = "The Amazon rainforest covers most of the Amazon basin of South America."
            response = runtime.invoke_endpoint(
                EndpointName=name,
                Body=json.dumps({"question": "Which basin?", "context": context}),
                ContentType="application/json",
            )
            answer = json.loads(response["Body"].read())
            assert context[answer["start"] : answer["end"]] == answer["answer"]
        with pytest.raises(ClientError) as err:
            runtime.invoke_endpoint(EndpointName="sagebox-missing", Body=b"{}", ContentType="application/json")
        assert err.value.response["Error"]["Code"] == "ValidationError"
        with pytest.raises(runtime.exceptions.ModelError) as model_err:
            runtime.invoke_endpoint(EndpointName="sagebox-c6i-int8", Body=b"{", ContentType="application/json")
        assert model_err.value.response["OriginalStatusCode"] == 400

        # Data capture as the stack configures it (10% of requests): sampled invocations land in the stack's bucket
        # as SageMaker's JSON Lines records, under <destination>/<endpoint>/<variant>/yyyy/mm/dd/hh/.
        summary = sagemaker.describe_endpoint(EndpointName="sagebox-c6i-int8")["DataCaptureConfig"]
        assert summary["CaptureStatus"] == "Started" and summary["CurrentSamplingPercentage"] == 10
        question = {"question": "Which basin?", "context": "The Amazon rainforest covers the Amazon basin."}
        for _ in range(40):
            runtime.invoke_endpoint(
                EndpointName="sagebox-c6i-int8", Body=json.dumps(question), ContentType="application/json"
            )
        bucket, _, prefix = summary["DestinationS3Uri"].removeprefix("s3://").partition("/")
        s3 = session.client("s3", endpoint_url=exports["AWS_ENDPOINT_URL"])
        keys: list[str] = []
        for _ in range(100):  # the gateway writes what it captured once a second
            listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/sagebox-c6i-int8/AllTraffic/")
            keys = [item["Key"] for item in listed.get("Contents", [])]
            if keys:
                break
            time.sleep(0.1)
        assert keys and all(key.endswith(".jsonl") for key in keys)
        records = [
            json.loads(line)
            for key in keys
            for line in s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode().splitlines()
        ]
        assert records
        for record in records:
            sent, answered = record["captureData"]["endpointInput"], record["captureData"]["endpointOutput"]
            assert set(json.loads(sent["data"])) == {"question", "context"} and sent["encoding"] == "JSON"
            assert {"answer", "score", "start", "end"} <= set(json.loads(answered["data"]))

        status = cli(state_dir, "status")
        assert status.returncode == 0, status.stderr
        for target in TARGETS:
            assert f"sagebox-{target}" in status.stdout
        assert "models: yours" in status.stdout and "InService" in status.stdout

        from sagebox.cli import bench

        args: argparse.Namespace = bench.build_parser_defaults()
        args.queries, args.warmup, args.out = 8, 1, tmp_path / "bench"
        assert bench.run(args) == 0
        results = json.loads((tmp_path / "bench" / "results.json").read_text())
        assert {row["endpoint"] for row in results["rows"]} == set(TARGETS)
        for row in results["rows"]:
            assert row["requests"] == 8 and row["errors"] == 0
            assert row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
            # The hand-written held-out set is scored beside the timed questions, never timed itself.
            assert 0 <= row["heldout_f1"] <= 100 and 0 <= row["heldout_em"] <= row["heldout_f1"]
        heldout = json.loads((REPO / "tests" / "data" / "heldout" / "heldout_qa.json").read_text(encoding="utf-8"))
        n_heldout = sum(len(p["qas"]) for article in heldout["data"] for p in article["paragraphs"])
        assert results["meta"]["heldout"].startswith(f"the hand-written held-out set ({n_heldout} questions")

        with pytest.raises(SageboxError, match="already running"):
            bring_up(UpOptions(TARGETS, state_dir=state_dir, models=built.out), quiet_step)
    finally:
        done = tear_down(state_dir, lambda line: None)
    assert state is not None and done > 0
    serving = [int(i["pid"]) for e in fleet.values() for v in e["variants"] for i in v["instances"]]
    assert len(serving) == 3
    assert not any(processes.alive(pid) for pid in [state.aws_pid, state.gateway_pid, *serving])
    assert load_state(state_dir) is None and not (state_dir / "endpoints").exists()
    assert tear_down(state_dir, lambda line: None) == 0  # safe to run twice


def test_up_refuses_unknown_targets_and_missing_models(built: Built, tmp_path: Path) -> None:
    packages = tmp_path / "packages"
    (packages / "fp32").mkdir(parents=True)
    (packages / "fp32" / "model.tar.gz").write_bytes(b"")
    with pytest.raises(SageboxError, match="unknown target"):
        bring_up(UpOptions(("c9-nope",), state_dir=tmp_path, models=packages), quiet_step)
    with pytest.raises(SageboxError, match=r"lacks the model of target\(s\) c6i-int8 \(int8/model.tar.gz\)"):
        bring_up(UpOptions(("c6i-int8",), state_dir=tmp_path, models=packages), quiet_step)
    with pytest.raises(SageboxError, match=r"holds no <variant>/model\.tar\.gz"):
        bring_up(UpOptions(("c6i-int8",), state_dir=tmp_path, models=tmp_path / "none"), quiet_step)
    assert load_state(tmp_path) is None


def test_bench_and_env_without_a_box_are_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sagebox.cli import bench

    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(tmp_path))
    args: argparse.Namespace = bench.build_parser_defaults()
    with pytest.raises(SageboxError, match="no endpoints"):
        bench.run(args)
    result = cli(tmp_path, "env")
    assert (
        result.returncode == 1
        and result.stderr.strip() == "sagebox: error: no local box is running: start one with `sagebox up`"
    )
