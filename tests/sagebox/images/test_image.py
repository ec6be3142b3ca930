"""The serving image as `cdk deploy` builds it: the default app's image asset (`cdk.out/*.assets.json`), built
through the Docker API (podman's socket here, Docker Engine elsewhere) with only CDK-context overrides, then run
as SageMaker runs it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sagebox.errors import SageboxError
from sagebox.images import asset, engine, run
from sagebox.images.offline import BuildEnvironment, prepare
from sagebox.paths import REPO
from tests.infra.model_tarballs import write_model_dir
from tests.run_once import one_at_a_time

if TYPE_CHECKING:
    import docker

pytestmark = [pytest.mark.slow, pytest.mark.image, pytest.mark.timeout(1800)]
TAG = "sagebox-serving:asset-test"


@pytest.fixture(scope="module")
def build_env() -> BuildEnvironment:
    return prepare(print)


@pytest.fixture(scope="module")
def client(build_env: BuildEnvironment) -> Iterator[docker.DockerClient]:
    made = engine.connect(build_env.docker_host)
    yield made
    made.close()


@pytest.fixture(scope="module")
def image_asset(build_env: BuildEnvironment, tmp_path_factory: pytest.TempPathFactory) -> asset.ImageAsset:
    """The default app (infra/targets.json, every target) synthesized with the offline build's CDK context."""
    from infra.app import build
    from infra.settings import AppSettings

    models = write_model_dir(tmp_path_factory.mktemp("models"))
    wheelhouse = REPO / build_env.wheelhouse if build_env.wheelhouse else None
    settings = AppSettings.from_context(
        {
            "model_dir": str(models),
            "base_image": build_env.base_image or "",
            "wheelhouse": str(wheelhouse or ""),
            "allow_emulated": "true",  # the default targets' test Neuron models are emulator-compiled
        },
        REPO,
        env={},
    )
    outdir = tmp_path_factory.mktemp("cdk.out")
    build(settings, outdir=outdir).synth()
    [found] = asset.read_image_assets(outdir)  # one image, shared by every endpoint stack
    return found


@pytest.fixture(scope="module")
def built(client: docker.DockerClient, image_asset: asset.ImageAsset, tmp_path_factory: pytest.TempPathFactory) -> str:
    with one_at_a_time(tmp_path_factory, "serving-image-build"):  # `cdk deploy`'s build then hits the layer cache
        asset.build_asset(client, image_asset, TAG, print)
    return TAG


def test_the_asset_is_the_repository_dockerfile_with_offline_build_arguments_only(
    image_asset: asset.ImageAsset, build_env: BuildEnvironment
) -> None:
    assert image_asset.dockerfile == "container/Dockerfile" and image_asset.platform == "linux/amd64"
    expected = {"BASE_IMAGE": build_env.base_image, "WHEELHOUSE": build_env.wheelhouse}
    assert image_asset.build_args == {k: v for k, v in expected.items() if v}
    staged = {p.name for p in image_asset.directory.iterdir()}
    assert staged <= {".dockerignore", "container", "neuron_emu", "build"}, staged
    code = sum(f.stat().st_size for f in image_asset.directory.rglob("*") if f.is_file() and "wheelhouse" not in str(f))
    print(f"build context without the wheelhouse: {code / 1e6:.2f} MB")
    assert code < 5e6  # .dockerignore keeps the context to the serving code


def test_the_built_asset_answers_ping_and_invocations_then_exits_0_on_sigterm(
    client: docker.DockerClient, built: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    assert asset.contract_findings(client.images.get(built).attrs) == []
    handle = run.run_container(client, built, tiny_model_dir)
    try:
        report = run.check(handle)
        attrs = client.api.inspect_container(handle.id)
    finally:
        run.remove(handle)
    print(f"first /ping {report.seconds_to_first_answer:.2f}s, 200 at {report.seconds_to_ping:.2f}s")
    assert report.exit_code == 0 and report.seconds_to_exit < run.STOP_GRACE_S
    assert report.answer["answer"] and report.answer["answer"] in run.SAMPLE_QUESTION["context"]
    assert attrs["Config"]["Cmd"] == ["serve"] and attrs["State"]["OOMKilled"] is False
    mounts = {m["Destination"]: m for m in attrs["Mounts"]}
    assert mounts["/opt/ml/model"]["RW"] is False


def test_a_root_owned_private_model_directory_serves_and_requests_are_not_served_as_root(
    client: docker.DockerClient, built: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """AWS: SageMaker runs containers as root and untars the model as root. 0700 directories, 0600 files."""
    private = tmp_path / "model"
    shutil.copytree(tiny_model_dir, private)
    for path in [private, *private.rglob("*")]:
        os.chown(path, 0, 0)
        path.chmod(0o700 if path.is_dir() else 0o600)
    handle = run.run_container(client, built, private)
    try:
        run.wait_ping(handle)
        answer = run.invoke(handle, run.SAMPLE_QUESTION)
        status = handle.container.exec_run(["cat", "/proc/1/status"]).output.decode()
        logs = handle.logs(tail=80)
    finally:
        run.remove(handle)
    assert answer["answer"]
    assert "model loaded as root; now serving as sagebox (uid 10001)" in logs
    # The server is the container's PID 1 (exec-form ENTRYPOINT): real, effective, saved and fs uid all 10001.
    [uids] = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")]
    assert uids == ["10001"] * 4, status


def test_the_image_holds_cpu_torch_and_no_build_leftovers(client: docker.DockerClient, built: str) -> None:
    probe = (
        "import os, pwd, importlib.metadata as m, torch; "
        "print(os.getuid(), pwd.getpwnam('sagebox').pw_uid, torch.version.cuda, os.path.exists('/tmp/sagebox-build'), "
        "sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].lower().startswith('nvidia')), "
        "'transformers' in {d.metadata['Name'] for d in m.distributions()})"
    )
    output = client.containers.run(built, entrypoint=["python", "-c", probe], remove=True)
    assert output.decode().split() == ["0", "10001", "None", "False", "[]", "False"]


def test_the_image_keeps_openvino_cpu_plugin_and_ir_frontend_only(client: docker.DockerClient, built: str) -> None:
    """The Dockerfile strips OpenVINO to what IR serving on the CPU loads (issue 41); AUTO, HETERO, BATCH stay."""
    probe = (
        "import pathlib, openvino as ov; libs = pathlib.Path(ov.__file__).parent / 'libs'; "
        "print(ov.Core().available_devices, sorted(p.name.split('.so')[0] for p in libs.glob('*_plugin.so*')), "
        "sorted(p.name.split('.so')[0] for p in libs.glob('*_frontend.so*')), (libs / 'cache.json').exists())"
    )
    output = client.containers.run(built, entrypoint=["python", "-c", probe], remove=True).decode().strip()
    plugins = ["auto_batch", "auto", "hetero", "intel_cpu"]
    expected = [["CPU"], sorted(f"libopenvino_{p}_plugin" for p in plugins), ["libopenvino_ir_frontend"], False]
    assert output == " ".join(str(part) for part in expected)


def test_a_failing_build_is_one_line_naming_the_failure(client: docker.DockerClient, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\nRUN echo about to fail && exit 3\n")
    broken = asset.ImageAsset("broken", tmp_path, "Dockerfile", "linux/amd64")
    logged: list[str] = []
    with pytest.raises(SageboxError, match=r"^building sagebox-serving:broken failed: ") as info:
        asset.build_asset(client, broken, "sagebox-serving:broken", logged.append)
    assert "\n" not in str(info.value)
