"""The demo's artifacts: the trained MiniLM QA model through `build_all`, cached per demo-model recipe."""

from __future__ import annotations

from collections.abc import Callable

from sagebox.paths import cache_dir
from sagebox.pipeline.build_all import Artifacts
from sagebox.pipeline.servable import BUILD_RECIPE


def demo_artifacts(say: Callable[[str], None] = lambda _: None) -> Artifacts:
    from container.env import available_cpus
    from sagebox.pipeline.build_all import build_all
    from sagebox.pipeline.demo_models import minilm_squad

    demo = minilm_squad(progress=say)
    root = cache_dir() / "artifacts" / f"{demo.folder.name}-r{BUILD_RECIPE}"
    return build_all(
        demo.folder,
        demo.dev_data,
        root,
        root / "packages",
        calibration_data=demo.train_data,
        threads=available_cpus(),
        say=say,
    )
