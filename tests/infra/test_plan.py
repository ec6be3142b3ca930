from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infra.errors import TargetError
from infra.model_artifact import ArtifactInfo, inspect_artifact
from infra.plan import (
    IMAGE_EXCLUDES,
    BuildImage,
    LocalModel,
    RegistryImage,
    S3Model,
    parse_ecr_uri,
    plan_endpoint,
    plan_endpoints,
    resolve_model,
    resolve_neuron_backend,
)
from infra.settings import AppSettings
from infra.targets import Target, load_targets, parse_targets
from tests.infra.conftest import IMAGE_URI
from tests.infra.model_tarballs import write_tarball


def target(**fields: Any) -> Target:
    base = {
        "name": "t1",
        "instance_type": "ml.c5.2xlarge",
        "model_data": "s3://models/fp32/model.tar.gz",
        "variant": "fp32",
        "image": IMAGE_URI,
    }
    return parse_targets({"targets": [{**base, **fields}]})[0]


def test_default_targets_plan_with_local_artifacts(settings: AppSettings, model_dir: Path) -> None:
    plans = {p.name: p for p in plan_endpoints(load_targets(), settings)}
    assert list(plans) == ["c5-fp32", "c6i-fp32", "c6i-int8", "inf2-neuron", "trn1-neuron"]
    c5 = plans["c5-fp32"]
    assert c5.endpoint_name == c5.stack_name == "sagebox-c5-fp32"
    assert c5.model == LocalModel(path=(model_dir / "fp32" / "model.tar.gz").resolve())
    assert isinstance(c5.image, BuildImage) and c5.image.dockerfile == "container/Dockerfile"
    assert c5.model_size_bytes is not None and c5.model_size_bytes > 4096
    # Volume KMS keys everywhere but on trn1, whose storage is instance-store NVMe.
    assert {name: p.volume_kms for name, p in plans.items()} == {
        "c5-fp32": True,
        "c6i-fp32": True,
        "c6i-int8": True,
        "inf2-neuron": True,
        "trn1-neuron": False,
    }
    assert plans["inf2-neuron"].startup_timeout_s == 900 and c5.startup_timeout_s == 300


def test_container_environment_is_sized_to_the_instance(settings: AppSettings) -> None:
    plans = {p.name: p for p in plan_endpoints(load_targets(), settings)}
    workers_threads = {
        name: (p.environment["SAGEMAKER_MODEL_SERVER_WORKERS"], p.environment["SAGEBOX_INTRA_OP_THREADS"])
        for name, p in plans.items()
    }
    # CPU: 8 vCPUs as 2 workers x 4 threads; Neuron: one worker per NeuronCore (2 per chip).
    assert workers_threads == {
        "c5-fp32": ("2", "4"),
        "c6i-fp32": ("2", "4"),
        "c6i-int8": ("2", "4"),
        "inf2-neuron": ("2", "2"),
        "trn1-neuron": ("2", "4"),
    }
    assert all(p.environment["SAGEMAKER_MODEL_SERVER_TIMEOUT"] == "60" for p in plans.values())


def test_environment_overrides_are_checked_against_the_container(settings: AppSettings) -> None:
    plan = plan_endpoint(target(environment={"SAGEBOX_MAX_BATCH_SIZE": "16"}), settings)
    assert plan.environment["SAGEBOX_MAX_BATCH_SIZE"] == "16"
    with pytest.raises(TargetError, match="SAGEBOX_BATCH is not read by the serving container"):
        plan_endpoint(target(environment={"SAGEBOX_BATCH": "16"}), settings)
    with pytest.raises(TargetError, match="SAGEMAKER_BIND_TO_PORT is set by SageMaker"):
        plan_endpoint(target(environment={"SAGEMAKER_BIND_TO_PORT": "9000"}), settings)
    with pytest.raises(TargetError, match="environment: SAGEBOX_MAX_BATCH_SIZE must be an integer"):
        plan_endpoint(target(environment={"SAGEBOX_MAX_BATCH_SIZE": "many"}), settings)


def test_variant_comes_from_the_manifest_when_not_declared(settings: AppSettings, tmp_path: Path) -> None:
    path = write_tarball(tmp_path / "m.tar.gz", "int8")
    assert plan_endpoint(target(variant=None, model_data=str(path)), settings).variant == "int8"
    with pytest.raises(TargetError, match=r"declares variant 'fp32' but the manifest inside .* says 'int8'"):
        plan_endpoint(target(model_data=str(path)), settings)
    bare = write_tarball(tmp_path / "bare.tar.gz", None)
    with pytest.raises(TargetError, match=r'set "variant".*: its tarball has no manifest\.json'):
        plan_endpoint(target(variant=None, model_data=str(bare)), settings)
    with pytest.raises(TargetError, match="synth cannot read a manifest from S3"):
        plan_endpoint(target(variant=None), settings)


def test_a_neuron_manifest_cannot_go_to_a_cpu_instance(settings: AppSettings, tmp_path: Path) -> None:
    path = write_tarball(tmp_path / "m.tar.gz", "neuron")
    with pytest.raises(TargetError, match=r"target 't1': a 'neuron' artifact .* not on ml\.c5\.2xlarge"):
        plan_endpoint(target(variant=None, model_data=str(path)), settings)


def test_placement_errors_name_the_target(settings: AppSettings) -> None:
    with pytest.raises(TargetError, match=r"target 't1': unknown instance type 'ml.c7i.2xlarge' \(known: "):
        plan_endpoint(target(instance_type="ml.c7i.2xlarge"), settings)
    with pytest.raises(TargetError, match="target 't1': 'fp32' is a CPU artifact"):
        plan_endpoint(target(instance_type="ml.inf2.xlarge"), settings)
    neuron = {"variant": "neuron", "neuron_backend": "torch_neuronx", "model_size_gib": 40}
    with pytest.raises(TargetError, match=r"model \(40.0 GiB\) is larger than the 32 GiB accelerator memory"):
        plan_endpoint(target(instance_type="ml.inf2.xlarge", **neuron), settings)
    # Twelve chips (384 GiB of HBM) hold it.
    big = plan_endpoint(target(instance_type="ml.inf2.48xlarge", **neuron), settings)
    assert big.model_size_bytes == 40 * 2**30


def test_missing_local_artifact_says_where_it_looked(settings: AppSettings, model_dir: Path) -> None:
    with pytest.raises(TargetError, match=rf"model artifact {model_dir}/int4/model.tar.gz does not exist"):
        plan_endpoint(target(model_data="int4/model.tar.gz"), settings)


def test_a_malformed_s3_uri_says_what_a_bucket_name_may_hold(settings: AppSettings) -> None:
    for uri in ("s3://b/model.tar.gz", "s3://Models/model.tar.gz", "s3://models"):
        with pytest.raises(TargetError, match=r"target 't1': model_data .* \(bucket: 3-63 lowercase letters"):
            resolve_model("t1", uri, settings)
    assert resolve_model("t1", "s3://abc/model.tar.gz", settings)[0] == S3Model(bucket="abc", key="model.tar.gz")


def test_images(settings: AppSettings) -> None:
    plan = plan_endpoint(target(), settings)
    assert plan.image == RegistryImage(uri=IMAGE_URI, repository=parse_ecr_uri(IMAGE_URI))
    assert plan.image.repository is not None
    assert plan.image.repository.arn == "arn:aws:ecr:us-east-1:123456789012:repository/sagebox-serving"
    cn = parse_ecr_uri("123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/team/qa@sha256:" + "a" * 64)
    assert cn is not None and cn.arn == "arn:aws-cn:ecr:cn-north-1:123456789012:repository/team/qa"
    gov = parse_ecr_uri("123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/qa")
    assert gov is not None and gov.partition == "aws-us-gov"
    with pytest.raises(TargetError, match="is neither 'build' nor an ECR image URI"):
        plan_endpoint(target(image="docker.io/library/python:3.11"), settings)
    with pytest.raises(TargetError, match=r"image 'build' needs .*/Dockerfile, which does not exist"):
        plan_endpoint(target(image="build"), AppSettings(build_context=Path("/nonexistent")))


def test_the_model_directory_stays_out_of_the_image_build_context(tmp_path: Path) -> None:
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    inside = AppSettings(build_context=tmp_path, model_dir=tmp_path / "build" / "models")
    image = plan_endpoint(target(image="build"), inside).image
    assert isinstance(image, BuildImage)
    assert image.exclude[-1] == "build/models" and ".venv" in image.exclude
    outside = AppSettings(build_context=tmp_path, model_dir=Path("/elsewhere/models"))
    image = plan_endpoint(target(image="build"), outside).image
    assert isinstance(image, BuildImage) and image.exclude[-1] == "**/__pycache__"


def test_settings_image_uri_replaces_every_target_image(settings: AppSettings) -> None:
    other = "210987654321.dkr.ecr.eu-west-1.amazonaws.com/mine:2"
    plan = plan_endpoint(target(image="build"), AppSettings(image_uri=other))
    assert isinstance(plan.image, RegistryImage) and plan.image.uri == other


def test_offline_builds_change_only_build_arguments(tmp_path: Path) -> None:
    """A base image and a wheelhouse become the Dockerfile's BASE_IMAGE and WHEELHOUSE; nothing else changes."""
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    plain = plan_endpoint(target(image="build"), AppSettings(build_context=tmp_path)).image
    assert isinstance(plain, BuildImage) and plain.build_args == {}
    wheels = tmp_path / "build" / "wheelhouse-abc"
    wheels.mkdir(parents=True)
    (wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    offline = AppSettings(build_context=tmp_path, base_image="localhost/base:1", wheelhouse=wheels)
    image = plan_endpoint(target(image="build"), offline).image
    assert isinstance(image, BuildImage)
    assert image.build_args == {"BASE_IMAGE": "localhost/base:1", "WHEELHOUSE": "build/wheelhouse-abc"}
    assert image.exclude[-1] == "!build/wheelhouse-abc/"  # staged into the asset whatever .dockerignore says
    assert (image.context, image.dockerfile) == (plain.context, plain.dockerfile)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TargetError, match="is not a folder of wheels"):
        plan_endpoint(target(image="build"), AppSettings(build_context=tmp_path, wheelhouse=empty))
    other = tmp_path / "other"
    (other / "container").mkdir(parents=True)
    (other / "container" / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(TargetError, match="must be inside the build context"):
        plan_endpoint(target(image="build"), AppSettings(build_context=other, wheelhouse=wheels))


def test_model_data_overrides_by_target_name(settings: AppSettings) -> None:
    overridden = AppSettings(model_data={"t1": "s3://elsewhere/x/model.tar.gz"})
    assert plan_endpoints([target()], overridden)[0].model == S3Model(bucket="elsewhere", key="x/model.tar.gz")
    with pytest.raises(TargetError, match="model_data given for unknown target"):
        plan_endpoints([target()], AppSettings(model_data={"t9": "s3://b/k"}))


@pytest.mark.parametrize(
    ("fields", "canary"),
    [
        ({}, None),  # autoscaling absent, one instance
        ({"instance_count": 2}, 1),
        (
            {
                "instance_count": 2,
                "autoscaling": {"min_instances": 1, "max_instances": 3, "invocations_per_instance": 100},
            },
            None,
        ),
        (
            {
                "instance_count": 2,
                "autoscaling": {"min_instances": 2, "max_instances": 3, "invocations_per_instance": 100},
            },
            1,
        ),
    ],
)
def test_canary_only_when_the_fleet_never_drops_below_two(fields: dict[str, Any], canary: int | None) -> None:
    assert plan_endpoint(target(**fields), AppSettings()).canary_instances == canary


def test_deployment_timeout_covers_two_bakes_startup_and_termination() -> None:
    plan = plan_endpoint(target(deployment={"bake_s": 600, "termination_wait_s": 300}), AppSettings())
    assert plan.max_deployment_s == 2 * 600 + 300 + 300 + 600
    long = plan_endpoint(
        target(deployment={"bake_s": 3600, "termination_wait_s": 3600}, startup_timeout_s=3600), AppSettings()
    )
    assert long.max_deployment_s == 14_400


# --- Neuron targets: what compiled the model decides the image, and emulated models need allowing.

EMULATED_REFUSAL = (
    "target 'inf2-neuron': the model was compiled by neuron_emu, an emulator whose graphs run on the host CPU: on "
    "ml.inf2.xlarge that is CPU inference at accelerator prices; compile it with `sagebox compile --backend "
    "torch-neuronx` on a Neuron host or in the AWS Neuron PyTorch DLC, or set allow_emulated: true (target field, or "
    "-c allow_emulated=true) to accept that"
)


def neuron_context(tmp_path: Path) -> Path:
    """A build context with both Dockerfiles, as the repository has them."""
    (tmp_path / "container").mkdir(exist_ok=True)
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "container" / "Dockerfile.neuron").write_text("FROM scratch\n")
    return tmp_path


def test_emulated_models_on_neuron_targets_are_refused_unless_allowed(model_dir: Path, tmp_path: Path) -> None:
    real_account = AppSettings(model_dir=model_dir, build_context=neuron_context(tmp_path))
    with pytest.raises(TargetError) as caught:
        plan_endpoints(load_targets(), real_account)  # the bundled targets over `sagebox build`'s neuron_emu model
    assert str(caught.value) == EMULATED_REFUSAL
    # Allowed for every target (the local box: -c allow_emulated=true), the emulator's model runs in the CPU image.
    box = AppSettings(model_dir=model_dir, build_context=tmp_path, allow_emulated=True)
    plans = {p.name: p for p in plan_endpoints(load_targets(), box)}
    for name in ("inf2-neuron", "trn1-neuron"):
        image = plans[name].image
        assert isinstance(image, BuildImage) and image.dockerfile == "container/Dockerfile"
        assert plans[name].neuron_backend == "neuron_emu"
    assert plans["c5-fp32"].neuron_backend is None
    # Or allowed by one target only.
    emulated = str(model_dir / "neuron" / "model.tar.gz")
    inf2 = {"instance_type": "ml.inf2.xlarge", "variant": None, "model_data": emulated, "image": "build"}
    allowed = plan_endpoint(target(**inf2, allow_emulated=True), real_account)
    assert isinstance(allowed.image, BuildImage) and allowed.image.dockerfile == "container/Dockerfile"
    with pytest.raises(TargetError, match="target 't1': the model was compiled by neuron_emu"):
        plan_endpoint(target(**inf2), real_account)


def test_the_image_follows_the_artifact(model_dir: Path, tmp_path: Path) -> None:
    context = neuron_context(tmp_path)
    wheels = tmp_path / "build" / "wheelhouse-x"
    wheels.mkdir(parents=True)
    (wheels / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    offline = AppSettings(model_dir=model_dir, build_context=context, base_image="localhost/base:1", wheelhouse=wheels)
    compiled = str(model_dir / "neuronx" / "model.tar.gz")
    inf2 = {"instance_type": "ml.inf2.xlarge", "variant": None, "model_data": compiled, "image": "build"}
    plan = plan_endpoint(target(**inf2), offline)
    assert plan.neuron_backend == "torch_neuronx"
    # The Neuron image: its own Dockerfile and base; the CPU image's offline build arguments stay with the CPU image.
    assert plan.image == BuildImage(
        context=context, dockerfile="container/Dockerfile.neuron", exclude=IMAGE_EXCLUDES, build_args={}
    )
    dlc = "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk2.30.0-u24"
    pinned = plan_endpoint(target(**inf2, neuron_base_image=dlc), offline).image
    assert isinstance(pinned, BuildImage) and pinned.build_args == {"BASE_IMAGE": dlc}
    cpu = plan_endpoint(target(image="build"), offline).image
    assert isinstance(cpu, BuildImage) and cpu.dockerfile == "container/Dockerfile"
    assert cpu.build_args == {"BASE_IMAGE": "localhost/base:1", "WHEELHOUSE": "build/wheelhouse-x"}
    # An ECR image is the user's choice, for either backend.
    assert plan_endpoint(target(**{**inf2, "image": IMAGE_URI}), offline).image == RegistryImage(
        uri=IMAGE_URI, repository=parse_ecr_uri(IMAGE_URI)
    )
    (context / "container" / "Dockerfile.neuron").unlink()
    with pytest.raises(TargetError, match=r"the Neuron image of a torch_neuronx model needs .*Dockerfile\.neuron"):
        plan_endpoint(target(**inf2), offline)


def test_neuron_models_in_s3_declare_their_backend(tmp_path: Path) -> None:
    settings = AppSettings(build_context=neuron_context(tmp_path))
    s3 = {"instance_type": "ml.trn1.2xlarge", "variant": "neuron", "image": "build"}
    with pytest.raises(TargetError) as caught:
        plan_endpoint(target(**s3), settings)
    assert str(caught.value) == (
        "target 't1': set \"neuron_backend\" (torch_neuronx, or neuron_emu with allow_emulated): synth cannot read a "
        "manifest from S3"
    )
    image = plan_endpoint(target(**s3, neuron_backend="torch_neuronx"), settings).image
    assert isinstance(image, BuildImage) and image.dockerfile == "container/Dockerfile.neuron"
    with pytest.raises(TargetError, match="compiled by neuron_emu"):
        plan_endpoint(target(**s3, neuron_backend="neuron_emu"), settings)
    bare = write_tarball(tmp_path / "bare.tar.gz", None)
    with pytest.raises(TargetError, match=r'set "neuron_backend" .*: its tarball has no manifest\.json'):
        plan_endpoint(target(**{**s3, "model_data": str(bare)}), settings)


def test_a_declared_backend_must_agree_with_the_manifest(model_dir: Path, tmp_path: Path) -> None:
    settings = AppSettings(build_context=neuron_context(tmp_path), allow_emulated=True)
    compiled = str(model_dir / "neuronx" / "model.tar.gz")
    fields = {"instance_type": "ml.inf2.xlarge", "variant": None, "model_data": compiled, "image": "build"}
    with pytest.raises(TargetError, match=r"declares neuron_backend 'neuron_emu' but the manifest inside .* says"):
        plan_endpoint(target(**fields, neuron_backend="neuron_emu"), settings)
    legacy = tmp_path / "legacy.tar.gz"
    write_tarball(legacy, "neuron")
    manifest = inspect_artifact(legacy).manifest
    assert manifest is not None
    # A neuron manifest that records no compile section (not one `sagebox compile` writes) says how to fix it.
    with pytest.raises(TargetError, match="records no compile section: compile the model again with `sagebox compile`"):
        resolve_neuron_backend(
            target(**fields), ArtifactInfo(legacy, 1, 1, manifest.model_copy(update={"compile": None}))
        )


def test_llm_endpoint_settings_reach_the_plan_and_a_volume_needs_ebs(settings: AppSettings) -> None:
    plan = plan_endpoint(
        target(
            startup_timeout_s=600,
            model_data_download_timeout_s=900,
            volume_size_gb=30,
            environment={"MAX_TOTAL_TOKENS": "1024", "MAX_BATCH_TOTAL_TOKENS": "16384"},
        ),
        settings,
    )
    assert (plan.startup_timeout_s, plan.model_data_download_timeout_s, plan.volume_size_gb) == (600, 900, 30)
    assert plan.environment["MAX_TOTAL_TOKENS"] == "1024"  # TGI's names are the container's own
    with pytest.raises(TargetError, match=r"volume_size_gb is not allowed on ml\.trn1\.2xlarge"):
        trn1 = target(
            instance_type="ml.trn1.2xlarge", variant="neuron", neuron_backend="torch_neuronx", volume_size_gb=30
        )
        plan_endpoint(trn1, settings)


def test_the_demo_llm_target_plans_with_one_worker_and_the_guides_timeouts(settings: AppSettings) -> None:
    targets = {t.name: t for t in load_targets(Path(__file__).resolve().parents[2] / "infra" / "examples" / "llm.json")}
    for name, variant in (("c6i-llm", "fp32"), ("c6i-llm-int8", "int8")):  # the demo's FP32 and INT8 LLM, alike
        in_s3 = targets[name].model_copy(update={"model_data": f"s3://models/llm/{variant}/model.tar.gz"})
        plan = plan_endpoint(in_s3, settings)
        assert plan.variant == variant and plan.instance.name == "ml.c6i.2xlarge"
        assert plan.environment["SAGEMAKER_MODEL_SERVER_WORKERS"] == "1" and plan.volume_size_gb == 30
        assert plan.model_data_download_timeout_s == 600 and plan.startup_timeout_s == 600
    assert targets["c6i-llm-int8"].environment == targets["c6i-llm"].environment
