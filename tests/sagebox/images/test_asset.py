"""The image asset as cdk-assets reads it, the checks around a build and a run: image configuration, build errors,
answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagebox.errors import SageboxError
from sagebox.images import asset, run

GOOD_ATTRS: dict[str, Any] = {
    "Os": "linux",
    "Architecture": "amd64",
    "Config": {"User": "", "Entrypoint": ["python", "-m", "container"], "ExposedPorts": {"8080/tcp": {}}},
}


def with_config(**changes: Any) -> dict[str, Any]:
    return {**GOOD_ATTRS, "Config": {**GOOD_ATTRS["Config"], **changes}}


def test_a_contract_keeping_image_has_no_findings() -> None:
    assert asset.contract_findings(GOOD_ATTRS) == []


@pytest.mark.parametrize(
    ("attrs", "finding"),
    [
        ({**GOOD_ATTRS, "Architecture": "arm64"}, "not linux/amd64"),
        (with_config(User="10001:10001"), "SageMaker expects containers to run as root"),
        (with_config(Entrypoint=["/bin/sh", "-c", "python -m container"]), "not exec-form"),
        (with_config(ExposedPorts={"80/tcp": {}}), "8080 is not exposed"),
    ],
)
def test_contract_breaches_are_named(attrs: dict[str, Any], finding: str) -> None:
    found = asset.contract_findings(attrs)
    assert len(found) == 1 and finding in found[0]


def test_build_output_is_logged_and_an_error_ends_it() -> None:
    logged: list[str] = []
    chunks: list[dict[str, Any]] = [
        {"stream": "STEP 1/2: FROM base\n"},
        {"stream": "\n"},
        {"error": 'building at STEP "RUN false": exit status 1\n', "errorDetail": {"message": "ignored"}},
        {"stream": "never read\n"},
    ]
    assert asset.build_error(iter(chunks), logged.append) == 'building at STEP "RUN false": exit status 1'
    assert logged == ["STEP 1/2: FROM base"]
    assert asset.build_error(iter([{"stream": "done\n"}]), logged.append) is None


def test_root_in_any_spelling_keeps_the_contract() -> None:
    for user in ("", "0", "root", "0:0", "root:root"):
        assert asset.contract_findings(with_config(User=user)) == []


def test_image_assets_are_read_as_cdk_assets_reads_them(tmp_path: Path) -> None:
    manifest = {
        "version": "39.0.0",
        "files": {"abc": {"source": {"path": "asset.abc.gz", "packaging": "file"}, "destinations": {}}},
        "dockerImages": {
            "f00d": {
                "source": {
                    "directory": "asset.f00d",
                    "dockerFile": "container/Dockerfile",
                    "platform": "linux/amd64",
                    "dockerBuildArgs": {"BASE_IMAGE": "localhost/base:1"},
                    "dockerBuildTarget": "serving",
                },
                "destinations": {},
            },
            "beef": {"source": {"executable": ["build.sh"]}, "destinations": {}},
        },
    }
    (tmp_path / "a.assets.json").write_text(json.dumps(manifest))
    (tmp_path / "b.assets.json").write_text(json.dumps(manifest))  # the same asset in two stacks
    [image] = asset.read_image_assets(tmp_path)
    assert image == asset.ImageAsset(
        "f00d",
        tmp_path / "asset.f00d",
        "container/Dockerfile",
        "linux/amd64",
        {"BASE_IMAGE": "localhost/base:1"},
        "serving",
    )


CONTEXT = "Sagebox serves its models on SageMaker endpoints."


def test_an_answer_must_be_the_context_characters_it_points_at() -> None:
    good = {"answer": "SageMaker endpoints", "score": 0.5, "start": 29, "end": 48}
    assert run.check_answer(json.dumps(good).encode(), CONTEXT) == good
    with pytest.raises(SageboxError, match="is not the context's characters"):
        run.check_answer(json.dumps({**good, "start": 0, "end": 7}).encode(), CONTEXT)
    with pytest.raises(SageboxError, match="without an 'answer' string"):
        run.check_answer(b'{"error": "Bad Request"}', CONTEXT)
    with pytest.raises(SageboxError, match="not JSON"):
        run.check_answer(b"<html>", CONTEXT)


def test_a_directory_without_a_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match=r"no manifest\.json"):
        run.run_container(None, "image", tmp_path)
