"""Real model.tar.gz files for tests: a valid manifest (first member) and the files it lists."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

from container.manifest import CompileSpec, Manifest, QuantizationSpec, SourceSpec, TokenizerSpec


def manifest_for(
    variant: str,
    files: dict[str, bytes],
    neuron_backend: str = "neuron_emu",
    tensor_parallel: int = 1,
    num_attention_heads: int | None = None,
) -> Manifest:
    """A valid manifest; a neuron one records its compile backend (neuron_emu is what `sagebox build` makes) and,
    when given, its tensor-parallel degree and attention heads."""
    return Manifest(
        tool_version="0.1.0",
        variant=variant,  # type: ignore[arg-type]
        runtime="neuron" if variant == "neuron" else "torchscript",
        model_file="model.pt",
        tokenizer=TokenizerSpec(file="tokenizer.json", max_length=384),
        sequence_buckets=[128, 384],
        source=SourceSpec(name="test-model", architecture="bert"),
        quantization=(
            QuantizationSpec(backend="torch", mode="dynamic", per_channel=True, calibration_batches=0)
            if variant == "int8"
            else None
        ),
        compile=(
            CompileSpec(
                backend=neuron_backend,  # type: ignore[arg-type]
                compiler="test",
                auto_cast="matmult",
                auto_cast_type="bf16",
                tensor_parallel=tensor_parallel,
                num_attention_heads=num_attention_heads,
            )
            if variant == "neuron"
            else None
        ),
        files={name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    )


def write_tarball(
    path: Path,
    variant: str | None,
    payload: bytes = b"\0" * 4096,
    manifest_first: bool = True,
    neuron_backend: str = "neuron_emu",
    tensor_parallel: int = 1,
    num_attention_heads: int | None = None,
) -> Path:
    """A deterministic model.tar.gz (fixed mtimes); `variant` None writes no manifest."""
    files = {"model.pt": payload, "tokenizer.json": b"{}"}
    members = list(files.items())
    if variant is not None:
        manifest = manifest_for(variant, files, neuron_backend, tensor_parallel, num_attention_heads)
        entry = ("manifest.json", manifest.to_json().encode())
        members = [entry, *members] if manifest_first else [*members, entry]
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def write_model_dir(root: Path) -> Path:
    """The layout infra/targets.json expects under its model directory (neuron/: compiled by neuron_emu, as
    `sagebox build` makes it), plus neuronx/: a neuron model compiled by torch_neuronx."""
    for variant in ("fp32", "int8", "neuron"):
        write_tarball(root / variant / "model.tar.gz", variant)
    write_tarball(root / "neuronx" / "model.tar.gz", "neuron", neuron_backend="torch_neuronx")
    return root
