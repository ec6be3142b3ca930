"""The notebook API (SageMaker SDK v3 resources) against an embedded AWS, the runtime gateway and a real server."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.server import ThreadedMotoServer

from sagebox.box import processes, runtime_gateway
from sagebox.box.moto_server import accept_catalog_instance_types
from sagebox.box.routes import Route, save_routes
from sagebox.local_server import LocalServer, free_port
from sagebox.paths import REPO
from tests.conftest import minilm_tokenizer_path
from tests.container.toy_model import build_toy_model_dir


def test_cli_start_up_does_not_import_the_sdk() -> None:
    code = (
        "import sys, sagebox.cli.app; sagebox.cli.app.build_parser(); "
        "print(any(m.startswith('sagemaker') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    accept_catalog_instance_types()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://localhost:{port}"
    server.stop()


def test_deploy_predict_delete_on_the_local_box(moto_url: str, tmp_path: Path) -> None:
    from sagebox.notebook import box_session, deploy

    model_dir = build_toy_model_dir(tmp_path / "model", minilm_tokenizer_path())
    routes = tmp_path / "routes.json"
    save_routes(routes, {})
    gateway_url, gateway_pid = runtime_gateway.spawn(routes, tmp_path / "gateway.log")
    try:
        with LocalServer.start(model_dir, tmp_path / "server.log") as server:
            session = box_session(moto_url, gateway_url, "us-east-1")
            s3 = session.client("s3")
            s3.create_bucket(Bucket="artifacts")
            s3.put_object(Bucket="artifacts", Key="toy/model.tar.gz", Body=b"not used by the local server")
            predictor = deploy(
                "s3://artifacts/toy/model.tar.gz",
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:0.1.0",
                "arn:aws:iam::123456789012:role/SageboxExecution",
                "ml.c6i.2xlarge",
                session=session,
                name="nb-toy",
            )
            sm = session.client("sagemaker")
            described = sm.describe_endpoint(EndpointName="nb-toy")
            assert described["EndpointStatus"] == "InService"
            config = sm.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            assert config["ProductionVariants"][0]["InstanceType"] == "ml.c6i.2xlarge"
            save_routes(routes, {"nb-toy": Route("nb-toy", server.url)})
            context = "The Amazon rainforest covers the Amazon basin."
            answer = predictor.predict({"question": "Which basin?", "context": context})
            assert context[answer["start"] : answer["end"]] == answer["answer"]
            batch = predictor.predict([{"question": "Which basin?", "context": context}] * 2)
            assert batch == [answer, answer]
            predictor.delete()
            assert sm.list_endpoints()["Endpoints"] == []
            assert sm.list_models()["Models"] == []
    finally:
        processes.stop(gateway_pid)


def test_deploy_refuses_bad_inputs_before_calling_aws() -> None:
    import boto3

    from sagebox.errors import SageboxError
    from sagebox.notebook import deploy

    session = boto3.session.Session(region_name="us-east-1")
    with pytest.raises(SageboxError, match="s3://"):
        deploy("/tmp/model.tar.gz", "img", "arn", "ml.c6i.2xlarge", session=session)
    from infra.catalog import CatalogError

    with pytest.raises(CatalogError, match="unknown instance type"):
        deploy("s3://b/k", "img", "arn", "ml.z9.huge", session=session)
