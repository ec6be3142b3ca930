"""container/Dockerfile.neuron, the image inf2/trn1 targets build for torch_neuronx models, read as text: no AWS
Neuron Deep Learning Container is reachable here, so it is never built in CI (the CPU image is:
tests/sagebox/images/test_image.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from infra.settings import DEFAULT_NEURON_DOCKERFILE, REPO_ROOT
from sagebox.pipeline.compile.neuron import NEURON_DLC

DOCKERFILE = REPO_ROOT / DEFAULT_NEURON_DOCKERFILE


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#")))
    found = []
    for line in text.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            found.append((keyword.upper(), " ".join(rest.split())))
    return found


def pins(path: Path) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return dict(line.split("==", 1) for line in lines if line)


def test_it_builds_from_the_neuron_dlc_that_compile_names() -> None:
    steps = instructions(DOCKERFILE)
    assert steps[0] == ("ARG", f"BASE_IMAGE={NEURON_DLC}")
    assert re.fullmatch(
        r"public\.ecr\.aws/neuron/pytorch-inference-neuronx:[\d.]+-neuronx-py3\d+-sdk[\d.]+-ubuntu[\d.]+", NEURON_DLC
    )
    assert [args for kind, args in steps if kind == "FROM"] == ["--platform=linux/amd64 ${BASE_IMAGE}"]


def test_it_keeps_the_sagemaker_contract_of_the_cpu_image() -> None:
    neuron, cpu = instructions(DOCKERFILE), instructions(REPO_ROOT / "container" / "Dockerfile")

    def last(steps: list[tuple[str, str]], kind: str) -> str:
        return [args for k, args in steps if k == kind][-1]

    for kind in ("ENTRYPOINT", "CMD", "EXPOSE", "WORKDIR"):
        assert last(neuron, kind) == last(cpu, kind), kind
    assert json.loads(last(neuron, "ENTRYPOINT")) == ["python", "-m", "container"]
    assert [args for kind, args in neuron if kind == "USER"] == ["root"]  # SageMaker runs containers as root
    copies = [args for kind, args in neuron if kind == "COPY"]
    assert "neuron_emu/ /opt/sagebox/neuron_emu/" in copies and "container/ /opt/sagebox/container/" in copies
    run = " ".join(args for kind, args in neuron if kind == "RUN")
    assert "useradd --uid 10001" in run  # the service user the server drops to (container/privileges.py)
    assert "import torch, torch_neuronx" in run  # the DLC's torch-neuronx must still import beside the pins
    env = " ".join(args for kind, args in neuron if kind == "ENV")
    assert "SAGEBOX_MODEL_DIR=/opt/ml/model" in env and "PYTHONPATH=/opt/sagebox" in env


def test_its_requirements_are_the_cpu_pins_without_torch_onnxruntime_and_openvino() -> None:
    """No ONNX model or OpenVINO IR runs there: their handlers are imported only for a manifest that names them."""
    cpu = pins(REPO_ROOT / "container" / "requirements.txt")
    neuron = pins(REPO_ROOT / "container" / "requirements-neuron.txt")
    cpu_only = {"torch", "onnxruntime", "openvino"}
    assert cpu_only <= set(cpu)
    assert neuron == {name: version for name, version in cpu.items() if name not in cpu_only}
    assert "requirements-neuron.txt" in DOCKERFILE.read_text()


def test_the_dockerignore_lets_it_and_its_requirements_into_the_context() -> None:
    rules = [line for line in (REPO_ROOT / ".dockerignore").read_text().splitlines() if not line.startswith("#")]
    assert "*" in rules and "!container/" in rules and "!neuron_emu/" in rules
