"""The notebook API (SageMaker SDK v3 resources) against an embedded AWS, the runtime gateway and a real server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sagebox.paths import REPO
from tests.conftest import EmbeddedAws


def test_cli_start_up_does_not_import_the_sdk() -> None:
    code = (
        "import sys, sagebox.cli.app; sagebox.cli.app.build_parser(); "
        "print(any(m.startswith('sagemaker') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_deploy_predict_delete_on_the_local_box(embedded_aws: EmbeddedAws, tiny_model_tarball: Path) -> None:
    """The README's notebook example against the box: the SDK creates the endpoint, the control plane serves it."""
    from sagebox.notebook import box_session, deploy

    session = box_session(embedded_aws.url, embedded_aws.gateway_url, "us-east-1")
    s3 = session.client("s3")
    s3.create_bucket(Bucket="notebook")
    s3.upload_file(str(tiny_model_tarball), "notebook", "int8/model.tar.gz")
    predictor = deploy(
        "s3://notebook/int8/model.tar.gz",
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
    context = "The Amazon rainforest covers the Amazon basin."
    answer = predictor.predict({"question": "Which basin?", "context": context})
    assert context[answer["start"] : answer["end"]] == answer["answer"]
    batch = predictor.predict([{"question": "Which basin?", "context": context}] * 2)
    assert batch == [answer, answer]
    predictor.delete()
    assert [e for e in sm.list_endpoints()["Endpoints"] if e["EndpointName"] == "nb-toy"] == []
    assert [m for m in sm.list_models()["Models"] if m["ModelName"] == "nb-toy"] == []


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
