"""Which packaged models `sagebox up` sees, and the LLM targets it deploys by default from them: c6i-llm for
llm/fp32, c6i-llm-int8 for llm/int8, inf2-llm for llm/neuron (the decoder compiled for NeuronCores)."""

from __future__ import annotations

from pathlib import Path

from sagebox.box.up import DEFAULT_TARGETS, check_targets, default_targets, has_models, targets_context


def _package(root: Path, *names: str) -> Path:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")
    return root


def test_a_models_folder_of_llm_packages_alone_holds_models(tmp_path: Path) -> None:
    assert not has_models(tmp_path / "none") and not has_models(tmp_path)
    assert has_models(_package(tmp_path / "llm-only", "llm/neuron/model.tar.gz"))
    assert has_models(_package(tmp_path / "qa", "fp32/model.tar.gz"))


def test_the_llm_targets_follow_their_packages(tmp_path: Path) -> None:
    both = _package(tmp_path / "both", "llm/fp32/model.tar.gz", "llm/neuron/model.tar.gz")
    assert default_targets(both) == (*DEFAULT_TARGETS, "c6i-llm", "inf2-llm")
    cpu = _package(tmp_path / "cpu", "llm/fp32/model.tar.gz")
    assert default_targets(cpu) == (*DEFAULT_TARGETS, "c6i-llm")
    demo = _package(tmp_path / "demo", "llm/fp32/model.tar.gz", "llm/int8/model.tar.gz")  # what `make demo` builds
    assert default_targets(demo) == (*DEFAULT_TARGETS, "c6i-llm", "c6i-llm-int8")
    assert check_targets(["c6i-llm-int8"], demo) == ("c6i-llm-int8",)
    assert targets_context(["c6i-llm-int8"])[-1].endswith("infra/examples/llm.json")
