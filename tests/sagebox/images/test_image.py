"""The real serving image, built and run through the Docker API (podman's socket here, Docker Engine elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import container
from sagebox.errors import SageboxError
from sagebox.images import builder, context, engine, run, wheelhouse
from sagebox.images.dirs import Paths
from sagebox.images.setup import Ready, setup

if TYPE_CHECKING:
    import docker

pytestmark = [pytest.mark.slow, pytest.mark.image, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def paths() -> Paths:
    return Paths.from_env()


@pytest.fixture(scope="module")
def ready(paths: Paths) -> Ready:
    return setup(paths, log=print)


@pytest.fixture(scope="module")
def client(ready: Ready) -> Iterator[docker.DockerClient]:
    made = engine.connect(ready.engine.base_url)
    yield made
    made.close()


@pytest.fixture(scope="module")
def inputs(paths: Paths, ready: Ready) -> builder.BuildInputs:
    requirements = REPO / "container" / "requirements.txt"
    wheels = wheelhouse.wheels(wheelhouse.ensure_wheelhouse(requirements, paths.image, subprocess.run, print))
    ca = context.find_ca_bundle(os.environ)
    return builder.serving_inputs(REPO, wheels, ca, ready.base_image, container.__version__)


@pytest.fixture(scope="module")
def built(client: docker.DockerClient, inputs: builder.BuildInputs, paths: Paths) -> builder.BuiltImage:
    return builder.build_image(client, inputs, paths.image, log=print)


@pytest.fixture
def model_dir(tiny_model_dir: Path, tmp_path: Path) -> Path:
    # SageMaker untars the model for a server that runs as the image's non-root user: it must be readable.
    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    run.make_readable(copy)
    return copy


def test_image_answers_ping_and_invocations_then_exits_0_on_sigterm(
    client: docker.DockerClient, built: builder.BuiltImage, model_dir: Path
) -> None:
    handle = run.run_container(client, built.tag, model_dir)
    try:
        report = run.check(handle)
        attrs = client.api.inspect_container(handle.id)
    finally:
        run.remove(handle)
    print(f"image {built.tag}: first /ping {report.seconds_to_first_answer:.2f}s, 200 at {report.seconds_to_ping:.2f}s")
    assert report.exit_code == 0 and report.seconds_to_exit < run.STOP_GRACE_S
    assert report.answer["answer"] and report.answer["answer"] in run.SAMPLE_QUESTION["context"]
    assert attrs["Config"]["Cmd"] == ["serve"] and attrs["State"]["OOMKilled"] is False
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/opt/ml/model"]["RW"] is False


def test_image_is_a_non_root_cpu_torch_image_without_build_leftovers(
    client: docker.DockerClient, built: builder.BuiltImage
) -> None:
    probe = (
        "import os, importlib.metadata as m, torch; "
        "print(os.getuid(), torch.version.cuda, os.path.exists('/tmp/sagebox-build'), "
        "sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].lower().startswith('nvidia')), "
        "'transformers' in {d.metadata['Name'] for d in m.distributions()})"
    )
    output = client.containers.run(built.tag, entrypoint=["python", "-c", probe], remove=True)
    assert output.decode().split() == ["10001", "None", "False", "[]", "False"]
    assert builder.check_image(client.images.get(built.tag).attrs) == []


def test_a_code_change_rebuilds_only_the_code_stage(
    client: docker.DockerClient, inputs: builder.BuildInputs, built: builder.BuiltImage, paths: Paths, tmp_path: Path
) -> None:
    changed = tmp_path / "container"
    shutil.copytree(REPO / "container", changed, ignore=shutil.ignore_patterns("__pycache__"))
    with (changed / "env.py").open("a") as fh:
        fh.write("# a code change\n")
    tag = "sagebox-serving:test-code-change"
    edited = builder.BuildInputs(
        **{**inputs.__dict__, "packages": {**inputs.packages, "container": changed}, "tag": tag}
    )
    try:
        first = builder.build_image(client, edited, paths.image)
        again = builder.build_image(client, edited, paths.image)
    finally:
        client.images.remove(tag)
    assert first.runtime_tag == built.runtime_tag and not first.runtime_rebuilt
    assert first.rebuilt and first.id != built.id
    assert not again.rebuilt and again.id == first.id
    print(f"rebuild after a code change: {first.seconds:.1f}s; unchanged: {again.seconds:.1f}s")


def test_a_failing_build_is_one_line_naming_the_failure(
    client: docker.DockerClient, inputs: builder.BuildInputs, paths: Paths, tmp_path: Path
) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text(
        "ARG BASE_IMAGE\nFROM ${BASE_IMAGE} AS runtime\nRUN echo about to fail && exit 3\n"
        "FROM runtime AS serving\nUSER 10001\n"
    )
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"unused")
    failing = builder.BuildInputs(
        **{**inputs.__dict__, "dockerfile": broken, "wheels": tuple(wheels.iterdir()), "tag": "sagebox-serving:broken"}
    )
    with pytest.raises(SageboxError, match=r"^building localhost/sagebox-serving-runtime:\w+ failed: .*exit") as info:
        builder.build_image(client, failing, tmp_path / "work")
    assert "\n" not in str(info.value)
    assert "about to fail" in (tmp_path / "work" / "build.log").read_text()
