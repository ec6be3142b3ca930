"""Shared fixtures: a tiny random BERT QA model folder and servable model directories built from it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.run_once import run_once

# Before anything loads torch's OpenMP runtime (libgomp reads it once, at load), here and in every process a test
# starts (serving processes, the box, the CLI inherit the environment): threads that wait for work sleep instead of
# spinning. `make test` runs more workers than cores, and a spinning thread burns the CPU that the thread it waits for
# needs. Measured on machine A (2 cores) with three busy loops beside it, the short-training test: 210 s and 153 s of
# CPU by default (ACTIVE), 136 s and 70 s with PASSIVE. The product's processes keep OpenMP's default: on an endpoint
# they have the instance's cores to themselves.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[1]

# Seconds each of the heaviest test files took in a cold clean-clone `.ci/run` (machine A, AMD EPYC with AVX-512 VNNI,
# 2026-12-08: four workers, an empty home, podman and mmdebstrap not installed; the sum of each file's tests' setup,
# call and teardown). `make test` hands whole files to the workers as they free up (pytest-xdist's loadfile: a file's
# module fixtures are built once), heaviest first, so that no long file starts last and runs alone at the end. The
# figures only order the files: a stale one costs time, never a test. Measure them with tests/timing_plugin.py.
FILE_SECONDS = {
    # The first wave: the cold container chain (podman installed, the base image made by mmdebstrap, the wheelhouse
    # downloaded, the serving image built: test_image.py's set-up, 333 s of its 348), the training (CPU), and two
    # files that mostly wait (the fault suite's time-scaled box, the real clients' 30-second waiter polls).
    "tests/sagebox/images/test_image.py": 348,
    "tests/sagebox/demo/test_models.py": 339,  # before its broken-recipe half went (tests/sagebox/pipeline)
    "tests/sagebox/test_fault_suite.py": 205,
    "tests/sagebox/box/test_real_clients_e2e.py": 181,
    # 507 s in that run, ~300 of it waiting for test_image.py's build of the image it then finds in the layer cache:
    # it starts in the second wave, when that build is well under way, instead of holding a worker from the start.
    "tests/sagebox/box/test_cdk_deploy.py": 170,
    "tests/sagebox/box/test_task_endpoints_e2e.py": 168,
    "tests/sagebox/box/test_box_restart.py": 147,
    "tests/container/test_server.py": 113,
    "tests/sagebox/box/test_up_down.py": 112,
    "tests/sagebox/box/test_guardrails_e2e.py": 97,
    "tests/neuron_emu/examples/test_customop_mlp_xla.py": 91,
    "tests/neuron_emu/test_tracing.py": 80,
    "tests/sagebox/bench/test_models.py": 74,
    "tests/infra/test_cli.py": 61,
    "tests/neuron_emu/examples/test_customop_mlp.py": 56,
    "tests/neuron_emu/parallel/test_heads.py": 47,
    "tests/neuron_emu/parallel/test_numerics.py": 47,
    "tests/sagebox/pipeline/test_minilm_embeddings.py": 44,
    "tests/container/handlers/test_neuron_parallel.py": 41,
    "tests/sagebox/pipeline/quantize/test_choose.py": 37,
    "tests/sagebox/cli/test_pipeline_commands.py": 36,
    "tests/sagebox/box/test_endpoint_types_e2e.py": 35,
    "tests/container/handlers/test_neuron.py": 34,
    "tests/sagebox/pipeline/compile/test_tensor_parallel.py": 32,
    "tests/sagebox/box/test_autoscaling_e2e.py": 31,
    "tests/neuron_emu/llm/test_agreement.py": 28,
    "tests/container/generation/test_neuron_service.py": 25,
    "tests/neuron_emu/parallel/test_serving.py": 24,
    "tests/sagebox/pipeline/export/test_generation.py": 23,
    "tests/sagebox/box/test_cfn_guardrails_e2e.py": 21,
    "tests/neuron_emu/llm/test_processes.py": 21,
    "tests/sagebox/pipeline/test_build_all.py": 21,
    "tests/sagebox/bench/test_serving.py": 21,
    "tests/sagebox/pipeline/test_task_builds.py": 17,  # its task_builds fixture is built by the task endpoints' file
    "tests/sagebox/box/test_generation_endpoint_e2e.py": 17,
    "tests/container/generation/test_engine.py": 9,
}


def pytest_configure(config: pytest.Config) -> None:
    """A worker of `make test` computes on one intra-op thread. Three workers share two cores (Makefile), and an
    operator split over two threads waits for both: when another process holds the core one of them needs, the whole
    call stalls. Measured on machine E (AMD EPYC, 2 vCPUs, 2026-12-07), the demo's short training beside one process
    that kept a core busy: 157 s with two threads, 119 s with one (56 s alone with two). Tests that need another
    count set it themselves (serving processes, which the tests start, choose their own)."""
    from tests.run_once import worker_id

    if worker_id() is not None:
        import torch

        torch.set_num_threads(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The heaviest files first (FILE_SECONDS); a stable sort, so pytest-randomly's shuffle (which runs before this
    hook) still orders the tests within each file and the files of equal weight."""
    items.sort(key=lambda item: -FILE_SECONDS.get(item.nodeid.split("::", 1)[0], 0))


@pytest.fixture(autouse=True)
def _seeded_torch() -> None:
    """Every test's random tensors come from a fixed seed (pytest-randomly seeds random and numpy, not torch)."""
    import sys

    torch = sys.modules.get("torch")  # seeded only where torch is already loaded: no import cost elsewhere
    if torch is not None:
        torch.manual_seed(0)


@pytest.fixture(scope="session", autouse=True)
def _stop_leftover_servers() -> Iterator[None]:
    """A test that fails half-way must not leave a serving process behind."""
    yield
    from tests.container.server_process import STARTED

    for server in STARTED:
        if server.process.poll() is None:
            server.stop(timeout=10)


def minilm_tokenizer_path() -> Path:
    from sagebox.demo.models import minilm_source_dir

    return minilm_source_dir() / "tokenizer.json"


def make_tiny_hf_folder(path: Path, seed: int = 0) -> Path:
    """A Hugging Face folder: tiny random BertForQuestionAnswering + a real uncased WordPiece tokenizer."""
    from sagebox.demo.models import TINY, make_random_bert_folder

    info = {"name": "tiny-random-bert", "license": "none: random weights"}
    return make_random_bert_folder(path, TINY, info, seed=seed)


@pytest.fixture(scope="session")
def tiny_hf_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_once(tmp_path_factory, "tiny-bert", lambda folder: make_tiny_hf_folder(folder / "tiny-bert"))


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 TorchScript model directory (manifest.json, model.pt, tokenizer.json)."""
    from sagebox.pipeline.export.servable import build_fp32

    def make(folder: Path) -> Path:
        build_fp32(tiny_hf_folder, folder / "tiny-torchscript", runtime="torchscript")
        return folder / "tiny-torchscript"

    return run_once(tmp_path_factory, "tiny-torchscript", make)


@pytest.fixture(scope="session")
def tiny_onnx_model_dir(tiny_hf_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A verified FP32 ONNX Runtime model directory."""
    from sagebox.pipeline.export.servable import build_fp32

    def make(folder: Path) -> Path:
        build_fp32(tiny_hf_folder, folder / "tiny-onnx", runtime="onnxruntime")
        return folder / "tiny-onnx"

    return run_once(tmp_path_factory, "tiny-onnx", make)


@pytest.fixture(scope="session")
def tiny_model_tarball(tiny_onnx_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny FP32 ONNX model packaged as SageMaker's model.tar.gz."""
    from sagebox.pipeline.package.tarball import package_model_dir

    return run_once(
        tmp_path_factory,
        "tiny-tarball",
        lambda folder: package_model_dir(tiny_onnx_model_dir, folder / "model.tar.gz").path,
    )


@dataclass(frozen=True)
class EmbeddedAws:
    """A running embedded AWS (patched moto server + the box's control plane, process mode) and its gateway."""

    url: str
    gateway_url: str
    state_dir: Path

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.gateway_url if service == "sagemaker-runtime" else self.url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def wait_in_service(self, name: str, delay_s: float = 1, attempts: int = 180) -> None:
        """boto3's `endpoint_in_service` waiter; a failure says the endpoint's FailureReason and its instances' last
        log lines (a WaiterError alone says only that the status was Failed)."""
        from botocore.exceptions import WaiterError

        sagemaker = self.client("sagemaker")
        try:
            sagemaker.get_waiter("endpoint_in_service").wait(
                EndpointName=name, WaiterConfig={"Delay": delay_s, "MaxAttempts": attempts}
            )
        except WaiterError as exc:
            described = sagemaker.describe_endpoint(EndpointName=name)
            logs = sorted((self.state_dir / "logs" / "endpoints" / name).glob("*.log"))
            tails = {log.name: log.read_text(errors="replace").splitlines()[-5:] for log in logs}
            raise AssertionError(
                f"endpoint {name} is {described['EndpointStatus']}: {described.get('FailureReason', '')!r}; "
                f"its instances' logs end with {tails}"
            ) from exc


@pytest.fixture(scope="session")
def embedded_aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedAws]:
    """One embedded AWS for the session's tests that drive it through the AWS APIs (as `sagebox up` starts it)."""
    from sagebox.box import processes
    from sagebox.box.state import BoxState, save_state
    from sagebox.box.up import start_embedded_aws, start_gateway

    state_dir = tmp_path_factory.mktemp("embedded-aws")
    state = BoxState()
    try:
        start_embedded_aws(state, state_dir)
        start_gateway(state, state_dir)
        save_state(state_dir, state)  # what `sagebox up` records: commands run with SAGEBOX_STATE_DIR find this box
        yield EmbeddedAws(state.aws_url, state.gateway_url, state_dir)
    finally:
        for pid in (state.gateway_pid, state.aws_pid):
            if pid:
                processes.stop(pid, timeout=40)


@pytest.fixture(scope="session")
def task_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """Every task on bert, distilbert and roberta, built once (tests/task_models.py): ~8 s a model."""
    from tests.task_models import build_every

    return run_once(tmp_path_factory, "task-builds", build_every)
