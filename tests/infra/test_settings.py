from __future__ import annotations

from pathlib import Path

import pytest

from infra.errors import InfraError
from infra.settings import DEFAULT_MODEL_DIR, AppSettings
from infra.targets import DEFAULT_TARGETS_FILE


def test_empty_context_gives_the_defaults(tmp_path: Path) -> None:
    settings = AppSettings.from_context({}, tmp_path)
    assert settings == AppSettings()
    assert settings.targets_file == DEFAULT_TARGETS_FILE and settings.model_dir == DEFAULT_MODEL_DIR
    assert not settings.cfn_validate and settings.only is None and settings.base_image is None


def test_cli_strings_are_parsed(tmp_path: Path) -> None:
    settings = AppSettings.from_context(
        {
            "targets": "mine.json",
            "model_dir": "/abs/models",
            "only": "c5-fp32, inf2-neuron",
            "prefix": "qa",
            "base_image": "localhost/base:1",
            "wheelhouse": "build/wheels",
            "cfn_validate": "1",
            "image_uri": "img",
            "model_data": "c5-fp32=s3://b/k1, inf2-neuron=s3://b/k2",
        },
        tmp_path,
    )
    assert settings.targets_file == tmp_path / "mine.json" and settings.targets_files == (tmp_path / "mine.json",)
    assert settings.model_dir == Path("/abs/models")
    assert settings.only == ("c5-fp32", "inf2-neuron")
    assert settings.prefix == "qa" and settings.cfn_validate and settings.image_uri == "img"
    assert settings.base_image == "localhost/base:1" and settings.wheelhouse == tmp_path / "build" / "wheels"
    assert settings.model_data == {"c5-fp32": "s3://b/k1", "inf2-neuron": "s3://b/k2"}


def test_json_context_values_from_cdk_json(tmp_path: Path) -> None:
    settings = AppSettings.from_context(
        {"cfn_validate": False, "only": ["c5-fp32"], "model_data": '{"c5-fp32": "s3://b/k"}'}, tmp_path
    )
    assert (
        not settings.cfn_validate and settings.only == ("c5-fp32",) and settings.model_data == {"c5-fp32": "s3://b/k"}
    )


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"cfn_validate": "2"}, "context 'cfn_validate' must be true or false"),
        ({"model_data": "c5-fp32"}, "entry 'c5-fp32' is not target=uri"),
        ({"model_data": "{not json"}, "context 'model_data' is not valid JSON"),
        ({"model_data": "[1]"}, "entry '[1]' is not target=uri"),
        ({"only": ","}, "context 'only' names no target"),
        ({"prefix": "Sage_Box"}, "prefix 'Sage_Box' must be lowercase"),
    ],
)
def test_bad_context_values(context: dict[str, object], message: str, tmp_path: Path) -> None:
    with pytest.raises(InfraError) as caught:
        AppSettings.from_context(context, tmp_path)
    assert message in str(caught.value)


def test_environment_stands_in_for_the_offline_build_keys(tmp_path: Path) -> None:
    """`sagebox env` exports these so that `npx cdk deploy` runs unchanged in the offline box."""
    env = {"SAGEBOX_BASE_IMAGE": "localhost/base:2", "SAGEBOX_WHEELHOUSE": "build/w"}
    settings = AppSettings.from_context({}, tmp_path, env)
    assert settings.base_image == "localhost/base:2" and settings.wheelhouse == tmp_path / "build" / "w"
    explicit = AppSettings.from_context({"base_image": "mine:1"}, tmp_path, env)
    assert explicit.base_image == "mine:1"  # the CLI's -c wins
    assert AppSettings.from_context({}, tmp_path, {}).base_image is None


def test_allow_emulated_from_the_context_or_the_box_environment(tmp_path: Path) -> None:
    """The local box passes -c allow_emulated=true and `sagebox env` exports SAGEBOX_ALLOW_EMULATED=1."""
    assert not AppSettings.from_context({}, tmp_path, {}).allow_emulated
    assert AppSettings.from_context({"allow_emulated": "true"}, tmp_path, {}).allow_emulated
    assert AppSettings.from_context({}, tmp_path, {"SAGEBOX_ALLOW_EMULATED": "1"}).allow_emulated
    assert not AppSettings.from_context(
        {"allow_emulated": False}, tmp_path, {"SAGEBOX_ALLOW_EMULATED": "1"}
    ).allow_emulated
    with pytest.raises(InfraError, match="context 'allow_emulated' must be true or false"):
        AppSettings.from_context({}, tmp_path, {"SAGEBOX_ALLOW_EMULATED": "maybe"})
    neuron = AppSettings.from_context({"neuron_dockerfile": "images/Neuron.dockerfile"}, tmp_path, {})
    assert neuron.neuron_dockerfile == "images/Neuron.dockerfile"
    assert AppSettings().neuron_dockerfile == "container/Dockerfile.neuron"


def test_the_targets_context_names_one_file_or_several(tmp_path: Path) -> None:
    settings = AppSettings.from_context({"targets": "a.json, sub/b.json"}, tmp_path)
    assert settings.targets_files == (tmp_path / "a.json", tmp_path / "sub" / "b.json")
    assert settings.targets_file == tmp_path / "a.json"
    assert AppSettings.from_context({"targets": ["x.json", "y.json"]}, tmp_path).targets_files[1] == tmp_path / "y.json"


def test_the_default_model_dir_is_build_models_else_the_demos_said_so(tmp_path: Path) -> None:
    from infra.settings import default_model_dir

    user, demo_cache, demo = tmp_path / "build" / "models", tmp_path / "cache" / "packages", tmp_path / "demo-models"
    assert default_model_dir(user, demo) == (user, ())  # nothing packaged anywhere: the targets say what is missing
    (demo_cache / "int8").mkdir(parents=True)
    (demo_cache / "int8" / "model.tar.gz").write_bytes(b"x")
    demo.symlink_to(demo_cache)  # what `make demo` leaves
    chosen, notes = default_model_dir(user, demo)
    assert chosen == demo
    [note] = notes
    assert f"{user} holds no packaged model: using the demo's" in note and str(demo_cache) in note
    (user / "fp32").mkdir(parents=True)
    (user / "fp32" / "model.tar.gz").write_bytes(b"x")
    assert default_model_dir(user, demo) == (user, ())  # yours win as soon as there are any
