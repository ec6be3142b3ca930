"""Session fixtures: one in-process synth of the whole app, model tarballs, a moto server on localhost."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.settings import AppSettings
from tests.infra.model_tarballs import write_model_dir

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

REGION = "us-east-1"
IMAGE_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagebox-serving:test"
ALL_TARGETS = ("c5-fp32", "c6i-fp32", "c6i-int8", "inf2-neuron", "trn1-neuron")
# The session's settings beyond the bundled targets: inf2-neuron serves the emulator's model (allowed explicitly,
# as the local box allows it), trn1-neuron a torch_neuronx model (the Neuron image). The CLI tests pass the same.
SESSION_CONTEXT = {"allow_emulated": "true", "model_data": "trn1-neuron=neuronx/model.tar.gz"}


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def build_context(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build context shaped like the repository's: container/Dockerfile and Dockerfile.neuron under its root."""
    root = tmp_path_factory.mktemp("build-context")
    (root / "container").mkdir()
    (root / "container" / "Dockerfile").write_text('FROM scratch\nENTRYPOINT ["serve"]\n')
    (root / "container" / "Dockerfile.neuron").write_text('FROM scratch\nLABEL neuron=1\nENTRYPOINT ["serve"]\n')
    return root


@pytest.fixture(scope="session")
def settings(model_dir: Path, build_context: Path) -> AppSettings:
    """The bundled targets over test tarballs (SESSION_CONTEXT); CloudFormation validation on, so CI checks every
    template."""
    return AppSettings.from_context(
        {**SESSION_CONTEXT, "model_dir": str(model_dir), "build_context": str(build_context), "cfn_validate": True},
        build_context,
        env={},
    )


@dataclass(frozen=True)
class Synthesized:
    templates: dict[str, dict[str, Any]]
    outdir: Path
    seconds: float


@pytest.fixture(scope="session")
def synthesized(settings: AppSettings, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The default app (infra/targets.json, every target) synthesized once, cdk-nag included."""
    from infra.app import build

    outdir = tmp_path_factory.mktemp("cdk.out")
    started = time.perf_counter()
    assembly = build(settings, outdir=outdir).synth()
    seconds = time.perf_counter() - started
    return Synthesized({s.stack_name: s.template for s in assembly.stacks}, outdir, seconds)


@pytest.fixture(scope="session")
def templates(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    return synthesized.templates


def client(service: str, endpoint_url: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
