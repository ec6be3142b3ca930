"""A second embedded AWS for the deployment tests: box time scaled by SAGEBOX_BOX_TIME_SCALE (as a user sets it for
`sagebox up`), with a good, a failing, a slow, a slower and an other-answering model uploaded
(tests/sagebox/box/guardrail_models.py); the gateway's weighted choices are seeded (SAGEBOX_GATEWAY_SEED)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import botocore.config
import pytest

from tests.conftest import EmbeddedAws, minilm_tokenizer_path

SCALE = 0.01  # a box minute lasts 0.6 s, a 900 s bake 9 s
BEHAVIOURS = ("good", "fail", "slow", "slower", "other")
GATEWAY_SEED = 16


@dataclass(frozen=True)
class ScaledBox:
    aws: EmbeddedAws
    scale: float
    started: datetime.datetime

    def client(self, service: str) -> Any:
        if service == "sagemaker-runtime":  # one attempt per call: every failure is counted
            import boto3

            return boto3.client(
                service,
                endpoint_url=self.aws.gateway_url,
                region_name="us-east-1",
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
                config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}),
            )
        return self.aws.client(service)


@pytest.fixture(scope="session")
def scaled_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ScaledBox]:
    from sagebox.box import processes
    from sagebox.box.embedded_aws.config import TIME_SCALE_ENV
    from sagebox.box.runtime_gateway import SEED_ENV
    from sagebox.box.state import BoxState
    from sagebox.box.up import start_embedded_aws, start_gateway
    from sagebox.pipeline.package.tarball import package_model_dir
    from tests.sagebox.box.guardrail_models import build_model_dir

    work = tmp_path_factory.mktemp("scaled-box")
    tarballs = {}
    for behaviour in BEHAVIOURS:
        model_dir = build_model_dir(work / behaviour, minilm_tokenizer_path(), behaviour)  # type: ignore[arg-type]
        tarballs[behaviour] = package_model_dir(model_dir, work / f"{behaviour}.tar.gz").path
    state = BoxState()
    state_dir = work / "state"
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(TIME_SCALE_ENV, str(SCALE))
            env.setenv(SEED_ENV, str(GATEWAY_SEED))
            start_embedded_aws(state, state_dir)
            start_gateway(state, state_dir)
        box = ScaledBox(
            EmbeddedAws(state.aws_url, state.gateway_url, state_dir), SCALE, datetime.datetime.now(datetime.UTC)
        )
        s3 = box.client("s3")
        s3.create_bucket(Bucket="models")
        for behaviour, tarball in tarballs.items():
            s3.upload_file(str(tarball), "models", f"{behaviour}.tar.gz")
        yield box
    finally:
        for pid in (state.gateway_pid, state.aws_pid):
            if pid:
                processes.stop(pid, timeout=40)
