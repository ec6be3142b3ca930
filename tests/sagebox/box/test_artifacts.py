"""The demo's packaged models are linked where the CDK app looks when build/models holds none."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagebox.box.artifacts import link_demo_models
from sagebox.box.say import WARNING


def test_the_link_points_at_the_cached_packages_and_follows_a_new_recipe(tmp_path: Path) -> None:
    first, second = tmp_path / "cache" / "r7" / "packages", tmp_path / "cache" / "r8" / "packages"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    link = tmp_path / "build" / "demo-models"
    link_demo_models(first, link)
    assert link.is_symlink() and link.resolve() == first
    link_demo_models(second, link)  # a later recipe's build replaces it
    assert link.resolve() == second
    assert sorted(p.name for p in link.parent.iterdir()) == ["demo-models"]  # no staging link left behind


def test_a_folder_of_that_name_is_left_alone(tmp_path: Path) -> None:
    link = tmp_path / "demo-models"
    (link / "int8").mkdir(parents=True)
    link_demo_models(tmp_path / "packages", link)
    assert not link.is_symlink() and (link / "int8").is_dir()


def test_an_llm_int8_refused_on_this_cpu_leaves_the_demo_its_fp32_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make demo` goes on when the LLM's INT8 misses its gate (its numerics depend on the CPU's instructions): the
    other models and the link are made, and it says which endpoint serves the LLM."""
    from types import SimpleNamespace

    from sagebox.box import artifacts
    from sagebox.demo import llm, models
    from sagebox.pipeline import build_all as build_all_module
    from sagebox.pipeline.gate.accuracy_gate import GateFailed

    monkeypatch.setenv("SAGEBOX_CACHE_DIR", str(tmp_path / "cache"))
    demo = SimpleNamespace(folder=tmp_path / "qa", dev_data=tmp_path / "dev.json", train_data=tmp_path / "train.json")
    monkeypatch.setattr(models, "minilm_squad", lambda progress: demo)
    monkeypatch.setattr(models, "minilm_source_dir", lambda: tmp_path / "minilm")
    monkeypatch.setattr(models, "minilm_licenses", lambda: "apache-2.0")
    monkeypatch.setattr(llm, "smollm2_gguf", lambda: tmp_path / "smol.gguf")
    built: list[str] = []

    def build_all(folder: Path, *args: object, task: str | None = None, **kwargs: object) -> str:
        built.append(task or "question-answering")
        if task == "text-generation":
            raise GateFailed("accuracy gate FAILED: INT8 perplexity ratio 1.11")
        return f"artifacts of {folder.name}"

    monkeypatch.setattr(build_all_module, "build_all", build_all)
    linked: list[Path] = []
    monkeypatch.setattr(artifacts, "link_demo_models", linked.append)
    said: list[str] = []
    assert artifacts.demo_artifacts(said.append) == "artifacts of qa"
    assert built == ["question-answering", "feature-extraction", "text-generation"]
    assert [p.name for p in linked] == ["packages"]
    [warning] = said
    assert warning.startswith(WARNING)  # kept on screen by `sagebox up`, not a passing progress line
    assert "INT8 is not deployed on this CPU (accuracy gate FAILED: INT8 perplexity ratio 1.11)" in warning
    assert warning.endswith("c6i-llm serves its FP32")
