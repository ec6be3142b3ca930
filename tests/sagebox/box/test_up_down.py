"""SageMaker in a box end to end, on tiny artifacts: up, invoke through boto3, bench, down (twice)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError

from sagebox.box import processes
from sagebox.box.down import tear_down
from sagebox.box.state import load_state
from sagebox.box.up import UpOptions, bring_up
from sagebox.errors import SageboxError

TARGETS = ("c6i-int8", "c6i-fp32", "inf2-neuron")


@contextlib.contextmanager
def quiet_step(title: str) -> Iterator[Callable[[str], None]]:
    yield lambda line: None


@pytest.fixture(scope="module")
def tiny_tarballs(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from sagebox.pipeline.compile import build_neuron
    from sagebox.pipeline.package import package_model_dir
    from sagebox.pipeline.quant_options import QuantizeOptions
    from sagebox.pipeline.quantize import build_int8
    from sagebox.pipeline.servable import build_fp32

    root = tmp_path_factory.mktemp("artifacts")
    build_fp32(tiny_hf_folder, root / "fp32", runtime="onnxruntime")
    build_int8(tiny_hf_folder, root / "fp32", root / "int8", QuantizeOptions())
    build_neuron(tiny_hf_folder, root / "neuron")
    return {v: package_model_dir(root / v, root / f"{v}.tar.gz").path for v in ("fp32", "int8", "neuron")}


@pytest.mark.slow
def test_up_invoke_bench_down(tiny_tarballs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state_dir = tmp_path / "state"
    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(state_dir))
    state = None
    try:
        state = bring_up(UpOptions(TARGETS, state_dir=state_dir, tarballs=tiny_tarballs), quiet_step)
        assert set(state.endpoints) == set(TARGETS)
        assert load_state(state_dir) == state

        # The embedded AWS holds the deployed endpoints (moto names them), with the catalog's instance types.
        sm = boto3.client(
            "sagemaker",
            endpoint_url=state.aws_url,
            region_name=state.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        for target, endpoint in state.endpoints.items():
            described = sm.describe_endpoint(EndpointName=endpoint.endpoint_name)
            assert described["EndpointStatus"] == "InService"
            config = sm.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            assert config["ProductionVariants"][0]["InstanceType"] == endpoint.instance_type
            assert endpoint.variant == {"c6i-int8": "int8", "c6i-fp32": "fp32", "inf2-neuron": "neuron"}[target]
            assert (Path(endpoint.model_dir) / "manifest.json").is_file()  # untarred like /opt/ml/model

        # boto3's sagemaker-runtime client reaches each endpoint's serving process through the gateway.
        runtime = boto3.client(
            "sagemaker-runtime",
            endpoint_url=state.gateway_url,
            region_name=state.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        context = "The Amazon rainforest covers most of the Amazon basin of South America."
        for endpoint in state.endpoints.values():
            response = runtime.invoke_endpoint(
                EndpointName=endpoint.endpoint_name,
                Body=json.dumps({"question": "Which basin?", "context": context}),
                ContentType="application/json",
            )
            answer = json.loads(response["Body"].read())
            assert context[answer["start"] : answer["end"]] == answer["answer"]
        with pytest.raises(ClientError) as err:
            runtime.invoke_endpoint(EndpointName="sagebox-missing", Body=b"{}", ContentType="application/json")
        assert err.value.response["Error"]["Code"] == "ValidationError"
        with pytest.raises(runtime.exceptions.ModelError) as model_err:
            runtime.invoke_endpoint(
                EndpointName=state.endpoints["c6i-int8"].endpoint_name, Body=b"{", ContentType="application/json"
            )
        assert model_err.value.response["OriginalStatusCode"] == 400

        # A short benchmark writes the table's rows, a CDF plot and a Markdown report.
        from sagebox.cli import bench

        args = bench.build_parser_defaults()
        args.queries, args.warmup, args.out = 8, 1, tmp_path / "bench"
        assert bench.run(args) == 0
        results = json.loads((tmp_path / "bench" / "results.json").read_text())
        assert {row["endpoint"] for row in results["rows"]} == set(TARGETS)
        for row in results["rows"]:
            assert row["requests"] == 8 and row["errors"] == 0
            assert row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"]
            assert row["usd_per_million"] > 0 and 0 <= row["f1"] <= 100
        assert (tmp_path / "bench" / "latency_cdf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "| c6i-int8 | ml.c6i.2xlarge | int8 |" in (tmp_path / "bench" / "report.md").read_text()

        with pytest.raises(SageboxError, match="already running"):
            bring_up(UpOptions(TARGETS, state_dir=state_dir, tarballs=tiny_tarballs), quiet_step)
    finally:
        done = tear_down(state_dir, lambda line: None)
    assert state is not None and done > 0
    pids = [state.aws_pid, state.gateway_pid, *(e.pid for e in state.endpoints.values())]
    assert not any(processes.alive(pid) for pid in pids)
    assert load_state(state_dir) is None
    assert not (state_dir / "endpoints").exists()
    assert tear_down(state_dir, lambda line: None) == 0  # safe to run twice


def test_up_refuses_unknown_targets(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match="unknown target"):
        bring_up(UpOptions(("c9-nope",), state_dir=tmp_path, tarballs={}), quiet_step)
    assert load_state(tmp_path) is None


def test_bench_without_a_box_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sagebox.cli import bench

    monkeypatch.setenv("SAGEBOX_STATE_DIR", str(tmp_path))
    args: argparse.Namespace = bench.build_parser_defaults()
    with pytest.raises(SageboxError, match="no endpoints"):
        bench.run(args)
