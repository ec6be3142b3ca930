"""Demo model directories, built on first use and cached (keyed by what they are built from)."""

from __future__ import annotations

from pathlib import Path

from scripts.errors import SageboxError
from scripts.paths import cache_dir


def tiny_fp32_dir() -> Path:
    """A tiny random BERT QA exported to ONNX FP32: for measuring serving overhead, not answers."""
    from container.manifest import ManifestError, load_verified
    from scripts.pipeline.build import build_fp32
    from scripts.pipeline.random_models import TINY, make_random_bert_folder

    root = cache_dir() / "models" / "tiny-random-bert"
    out = root / "fp32-onnx"
    try:
        load_verified(out)
        return out
    except ManifestError:
        pass
    hf = root / "hf"
    if not (hf / "config.json").is_file():
        make_random_bert_folder(hf, TINY, name="tiny-random-bert")
    build_fp32(hf, out, runtime="onnxruntime")
    return out


def bert_base_int8_dir() -> Path:
    raise SageboxError("no INT8 BERT-base model yet: pass --int8-model-dir (built by `sagebox quantize`)")
