"""The checks around a build and a run: image configuration, build errors, answers, model directory access."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sagebox.errors import SageboxError
from sagebox.images import builder, run

GOOD_ATTRS: dict[str, Any] = {
    "Os": "linux",
    "Architecture": "amd64",
    "Config": {"User": "10001:10001", "Entrypoint": ["python", "-m", "container"], "ExposedPorts": {"8080/tcp": {}}},
}


def with_config(**changes: Any) -> dict[str, Any]:
    return {**GOOD_ATTRS, "Config": {**GOOD_ATTRS["Config"], **changes}}


def test_a_contract_keeping_image_has_no_findings() -> None:
    assert builder.check_image(GOOD_ATTRS) == []


@pytest.mark.parametrize(
    ("attrs", "finding"),
    [
        ({**GOOD_ATTRS, "Architecture": "arm64"}, "not linux/amd64"),
        (with_config(User=""), "runs as root"),
        (with_config(User="0:0"), "runs as root"),
        (with_config(Entrypoint=["/bin/sh", "-c", "python -m container"]), "not exec-form"),
        (with_config(ExposedPorts={"80/tcp": {}}), "8080 is not exposed"),
    ],
)
def test_contract_breaches_are_named(attrs: dict[str, Any], finding: str) -> None:
    found = builder.check_image(attrs)
    assert len(found) == 1 and finding in found[0]


def test_build_output_is_logged_and_an_error_ends_it() -> None:
    logged: list[str] = []
    chunks: list[dict[str, Any]] = [
        {"stream": "STEP 1/2: FROM base\n"},
        {"stream": "\n"},
        {"error": 'building at STEP "RUN false": exit status 1\n', "errorDetail": {"message": "ignored"}},
        {"stream": "never read\n"},
    ]
    assert builder.build_error(iter(chunks), logged.append) == 'building at STEP "RUN false": exit status 1'
    assert logged == ["STEP 1/2: FROM base"]
    assert builder.build_error(iter([{"stream": "done\n"}]), logged.append) is None


def test_inputs_digest_changes_with_build_arguments() -> None:
    assert builder.inputs_digest("abc", {"BASE_IMAGE": "a"}) != builder.inputs_digest("abc", {"BASE_IMAGE": "b"})
    assert builder.inputs_digest("abc", {"X": "1", "Y": "2"}) == builder.inputs_digest("abc", {"Y": "2", "X": "1"})


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


def test_a_model_directory_the_non_root_server_cannot_read_is_refused_before_running(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir(mode=0o700)
    model.chmod(0o700)  # whatever the umask
    (model / "manifest.json").write_text("{}")
    (model / "model.onnx").write_bytes(b"\0")
    (model / "model.onnx").chmod(0o600)
    assert run.unreadable(model) == [model, model / "model.onnx"]
    with pytest.raises(SageboxError, match="not readable by the image's non-root user"):
        run.run_container(None, "image", model)  # refused before any engine call
    run.make_readable(model)
    assert run.unreadable(model) == []
    assert (model.stat().st_mode & 0o777, (model / "model.onnx").stat().st_mode & 0o777) == (0o755, 0o644)


def test_a_directory_without_a_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SageboxError, match=r"no manifest\.json"):
        run.run_container(None, "image", tmp_path)
