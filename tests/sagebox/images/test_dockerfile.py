"""The serving Dockerfile keeps the SageMaker contract, and the two-part build covers it exactly."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from sagebox.errors import SageboxError
from sagebox.images import dockerfile

REPO = Path(__file__).resolve().parents[3]
TEXT = (REPO / "container" / "Dockerfile").read_text()


def instructions(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_head_and_rebased_tail_hold_every_instruction_in_order() -> None:
    head = dockerfile.head(TEXT, "runtime")
    tail = dockerfile.rebased_tail(TEXT, "runtime", "localhost/sagebox-serving-runtime:0123")
    preamble = instructions("\n".join(dockerfile.parse(TEXT).preamble))
    tail_body = instructions(tail)[len(preamble) :]
    assert tail_body[0] == "FROM localhost/sagebox-serving-runtime:0123 AS serving"
    original = instructions(TEXT)
    assert instructions(head) + tail_body[1:] == [line for line in original if line != "FROM runtime AS serving"]
    assert [s.name for s in dockerfile.parse(head).stages] == ["wheels", "runtime"]


def test_base_stages_are_linux_amd64_and_the_last_stage_builds_on_runtime() -> None:
    parsed = dockerfile.parse(TEXT)
    assert [s.name for s in parsed.stages] == ["wheels", "runtime", "serving"]
    for stage in parsed.stages[:2]:
        assert stage.base == "${BASE_IMAGE}" and "--platform=linux/amd64" in stage.lines[0]
    assert parsed.stages[-1].base == "runtime"


def test_serving_stage_is_non_root_exec_form_serve_on_8080() -> None:
    lines = instructions(TEXT)
    entrypoint = [line for line in lines if line.startswith("ENTRYPOINT")]
    assert [json.loads(line.split(" ", 1)[1]) for line in entrypoint] == [["python", "-m", "container"]]
    assert [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("CMD")] == [["serve"]]
    users = [line.split()[1] for line in lines if line.startswith("USER")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert "EXPOSE 8080" in lines


def test_torch_is_checked_to_be_a_cpu_build_and_no_cuda_index_is_named() -> None:
    assert "torch.version.cuda is None" in TEXT
    assert not re.search(r"whl/cu\d", TEXT)


def test_requirements_pin_the_runtime_deps_like_pyproject_without_transformers() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = dict(dep.split("==") for dep in pyproject["project"]["dependencies"])
    lines = [line.strip() for line in (REPO / "container" / "requirements.txt").read_text().splitlines()]
    required = dict(line.split("==") for line in lines if line and not line.startswith("#"))
    assert set(required) == {
        "torch", "numpy", "tokenizers", "onnxruntime", "starlette", "uvicorn", "httptools", "uvloop", "pydantic"
    }  # fmt: skip
    assert {name: pins[name] for name in required} == required
    assert required["torch"] == "2.13.0"


def test_from_inside_a_continued_run_line_is_not_a_stage() -> None:
    text = "ARG X=1\nFROM a AS one\nRUN echo \\\n  FROM b\nFROM one AS two\nRUN true\n"
    parsed = dockerfile.parse(text)
    assert [(s.base, s.name) for s in parsed.stages] == [("a", "one"), ("one", "two")]
    assert dockerfile.rebased_tail(text, "one", "img:1") == "ARG X=1\nFROM img:1 AS two\nRUN true\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RUN true\n", "no FROM"),
        ("FROM a AS runtime\nFROM b AS serving\n", "not the 'runtime' stage"),
        ("FROM a AS runtime\nFROM a AS x\nFROM runtime AS serving\n", "right before the last stage"),
        ("FROM a b c d\n", "cannot read"),
    ],
)
def test_unusable_dockerfiles_are_refused(text: str, message: str) -> None:
    with pytest.raises(SageboxError, match=message):
        dockerfile.rebased_tail(text, "runtime", "img:1")


def test_head_needs_the_named_stage() -> None:
    with pytest.raises(SageboxError, match="no stage named 'runtime'"):
        dockerfile.head("FROM a AS other\n", "runtime")
