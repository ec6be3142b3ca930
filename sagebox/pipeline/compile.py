"""Compile a Hugging Face QA folder for NeuronCores (via neuron_emu) into a servable model directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from container.manifest import CompileSpec, Manifest
from infra.catalog import load_prices
from sagebox.errors import SageboxError
from sagebox.pipeline.artifact import staged_dir, write_manifest
from sagebox.pipeline.hf_model import QAModule, check_model_folder, load_qa_module
from sagebox.pipeline.servable import buckets_for, source_spec

# Each bucket is a graph compiled for, and held in, NeuronCore memory: fewer and coarser than on CPU.
NEURON_BUCKETS = (64, 128, 256, 384)


def build_neuron(
    model_dir: Path,
    out_dir: Path,
    *,
    batch_size: int = 1,
    compiler_args: str | None = None,
    module: QAModule | None = None,
) -> Manifest:
    """Trace one graph per sequence bucket with Neuron auto-cast numerics; write graph, cost plan and manifest."""
    from neuron_emu import compile_qa
    from neuron_emu.errors import NeuronEmuError

    config = check_model_folder(model_dir)
    module = module or load_qa_module(model_dir)
    buckets, max_length = buckets_for(config, NEURON_BUCKETS)
    with staged_dir(out_dir) as staging:
        try:
            # The plans price each instance type with the catalog's on-demand prices (neuron_emu holds none).
            artifact = compile_qa(module, buckets, batch_size, compiler_args, staging, prices=load_prices().per_hour)
        except NeuronEmuError as exc:
            raise SageboxError(f"Neuron compilation failed: {exc}") from None
        shutil.copyfile(model_dir / "tokenizer.json", staging / "tokenizer.json")
        manifest = write_manifest(
            staging,
            variant="neuron",
            runtime="neuron",
            model_file=artifact.model_file,
            buckets=buckets,
            max_length=max_length,
            source=source_spec(model_dir, config),
            compile_spec=CompileSpec(**artifact.compile_info().to_dict()),
        )
    return manifest
