"""The image installs exactly the `serving` extra's pins (container/requirements.txt, in the build context)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def pins(lines: list[str]) -> dict[str, str]:
    found = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line and "==" in line and not line.startswith("sagebox["):
            name, version = line.split("==", 1)
            found[name.strip().lower()] = version.strip()
    return found


def test_requirements_pin_the_serving_extra_with_the_cpu_torch_wheel() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    serving = pins(project["optional-dependencies"]["serving"])
    image = pins((REPO / "container" / "requirements.txt").read_text().splitlines())
    assert image.pop("torch") == serving.pop("torch") + "+cpu"  # the CPU build: PyPI's 2.13.0 pulls CUDA wheels
    assert image == serving
    assert "transformers" not in image  # build-time only: 4-5 s of import the server never pays


def test_every_extra_pins_what_it_names() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            assert requirement.startswith("sagebox[") or "==" in requirement, (extra, requirement)
    assert all("==" in r for r in project["dependencies"])
